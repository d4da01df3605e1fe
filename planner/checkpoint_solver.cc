#include "planner/checkpoint_solver.h"

#include <algorithm>
#include <limits>

namespace headroom {

CheckpointSolution SolveCheckpoints(const ChainMemoryModel& m, int64_t budget) {
  const int n = m.num_blocks();
  CheckpointSolution out;
  if (m.fixed_peak > budget) return out;
  int64_t max_saved = 0;
  for (int64_t s : m.saved) max_saved += s;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // cost[D]: least recomputation over the blocks so far with D units saved by them.
  std::vector<double> cost(max_saved + 1, kInf), next(max_saved + 1, kInf);
  std::vector<std::vector<char>> took(n, std::vector<char>(max_saved + 1, 0));
  cost[0] = 0;
  int64_t reach = 0;  // largest D reachable so far
  for (int i = 0; i < n; ++i) {
    std::fill(next.begin(), next.begin() + reach + m.saved[i] + 1, kInf);
    for (int64_t d = 0; d <= reach; ++d) {
      if (cost[d] == kInf) continue;
      // On equal cost prefer not checkpointing a later block, so that ties put the
      // checkpoints first, where they lower every later peak.
      if (m.block_peak[i] - d <= budget && cost[d] <= next[d]) {
        next[d] = cost[d];
        took[i][d] = 0;
      }
      const int64_t nd = d + m.saved[i];
      const double c = cost[d] + m.recompute_cost[i];
      if (m.block_peak[i] - d + m.kept[i] <= budget && c < next[nd]) {
        next[nd] = c;
        took[i][nd] = 1;
      }
    }
    reach += m.saved[i];
    std::swap(cost, next);
  }
  int64_t best = -1;
  for (int64_t d = 0; d <= reach; ++d) {
    if (cost[d] == kInf || m.head_peak - d > budget) continue;
    if (best < 0 || cost[d] <= cost[best]) best = d;  // ties: the larger saving
  }
  if (best < 0) return out;
  out.feasible = true;
  out.recompute_cost = cost[best];
  out.checkpointed.assign(n, false);
  for (int i = n - 1, d = static_cast<int>(best); i >= 0; --i) {
    if (took[i][d]) {
      out.checkpointed[i] = true;
      d -= static_cast<int>(m.saved[i]);
    }
  }
  out.peak_units = m.PeakUnits(out.checkpointed);
  return out;
}

std::vector<MicroBatchChoice> RankMicroBatches(const std::vector<MicroBatchOption>& options,
                                               const ChainSolver& solve) {
  std::vector<MicroBatchChoice> ranked;
  for (size_t k = 0; k < options.size(); ++k) {
    const MicroBatchOption& o = options[k];
    CheckpointSolution s = solve(o.model, o.budget_units);
    if (!s.feasible) continue;
    const double per_sample =
        (o.base_seconds + s.recompute_cost) / static_cast<double>(o.micro_batch);
    ranked.push_back({static_cast<int>(k), std::move(s), per_sample});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const MicroBatchChoice& x, const MicroBatchChoice& y) {
                     return x.seconds_per_sample < y.seconds_per_sample;
                   });
  return ranked;
}

}  // namespace headroom
