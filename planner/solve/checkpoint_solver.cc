#include "planner/solve/checkpoint_solver.h"

#include <algorithm>

namespace headroom {

CheckpointSolution SolveCheckpoints(const ChainMemoryModel& m, int64_t budget) {
  const int n = m.num_blocks();
  CheckpointSolution out;
  if (m.fixed_peak > budget) return out;
  // The DP's states after each block: (saved units D, least recomputation for D). A
  // state is dominated when another saves at least as much for no more cost (every
  // constraint is "peak - D <= budget", so more saving never hurts), so only the Pareto
  // front is kept, sorted by D with the cost rising strictly. For a homogeneous chain it
  // has at most i + 1 states after block i instead of one per unit of memory.
  struct State {
    int64_t saved;
    double cost;
    int parent;  // index into the previous block's front
    bool took;   // this block checkpointed
  };
  std::vector<std::vector<State>> fronts(n);
  std::vector<State> front{{0, 0.0, -1, false}}, candidates;
  for (int i = 0; i < n; ++i) {
    candidates.clear();
    for (int k = 0; k < static_cast<int>(front.size()); ++k) {
      const State& s = front[k];
      if (m.block_peak[i] - s.saved <= budget) candidates.push_back({s.saved, s.cost, k, false});
      if (m.block_peak[i] - s.saved + m.recompute_extra[i] <= budget) {
        candidates.push_back({s.saved + m.saved[i], s.cost + m.recompute_cost[i], k, true});
      }
    }
    // Largest saving first; on equal saving the cheaper, and on equal cost not
    // checkpointing this block, so that ties put the checkpoints first, where they lower
    // every later peak.
    std::sort(candidates.begin(), candidates.end(), [](const State& a, const State& b) {
      if (a.saved != b.saved) return a.saved > b.saved;
      if (a.cost != b.cost) return a.cost < b.cost;
      return a.took < b.took;
    });
    front.clear();
    for (const State& c : candidates) {
      if (front.empty() || c.cost < front.back().cost) front.push_back(c);
    }
    std::reverse(front.begin(), front.end());
    if (front.empty()) return out;
    fronts[i] = front;
  }
  int best = -1;
  for (int k = 0; k < static_cast<int>(front.size()); ++k) {
    if (m.head_peak - front[k].saved > budget) continue;
    if (best < 0 || front[k].cost <= front[best].cost) best = k;  // ties: the larger saving
  }
  if (best < 0) return out;
  out.feasible = true;
  out.recompute_cost = front[best].cost;
  out.checkpointed.assign(n, false);
  for (int i = n - 1, k = best; i >= 0; --i) {
    const State& s = fronts[i][k];
    out.checkpointed[i] = s.took;
    k = s.parent;
  }
  out.peak_units = m.PeakUnits(out.checkpointed);
  return out;
}

std::vector<MicroBatchChoice> RankSolvedMicroBatches(const std::vector<MicroBatchOption>& options,
                                                     std::vector<CheckpointSolution> solutions) {
  std::vector<MicroBatchChoice> ranked;
  for (size_t k = 0; k < options.size(); ++k) {
    if (!solutions[k].feasible) continue;
    const MicroBatchOption& o = options[k];
    const double per_sample =
        (o.base_seconds + solutions[k].recompute_cost) / static_cast<double>(o.micro_batch);
    ranked.push_back({static_cast<int>(k), std::move(solutions[k]), per_sample});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const MicroBatchChoice& x, const MicroBatchChoice& y) {
                     return x.seconds_per_sample < y.seconds_per_sample;
                   });
  return ranked;
}

std::vector<MicroBatchChoice> RankMicroBatches(const std::vector<MicroBatchOption>& options,
                                               const ChainSolver& solve) {
  std::vector<CheckpointSolution> solutions;
  for (const MicroBatchOption& o : options) solutions.push_back(solve(o.model, o.budget_units));
  return RankSolvedMicroBatches(options, std::move(solutions));
}

}  // namespace headroom
