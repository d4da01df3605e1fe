// The checkpoint solver against brute force over every checkpoint subset (and every
// micro-batch option) on random heterogeneous chains, at many budgets.
#include <random>

#include <gtest/gtest.h>

#include "planner/solve/checkpoint_solver.h"

namespace headroom {
namespace {

ChainMemoryModel RandomChain(std::mt19937& rng, int n, int64_t scale) {
  std::uniform_int_distribution<int64_t> small(0, 20), big(10, 60);
  std::uniform_real_distribution<double> seconds(0.1, 5.0);
  ChainMemoryModel m;
  m.fixed_peak = scale * small(rng);
  int64_t stored_total = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t kept = scale * (1 + small(rng) / 4);
    const int64_t saved = scale * small(rng);  // heterogeneous, sometimes nothing to save
    m.recompute_extra.push_back(kept);
    m.saved.push_back(saved);
    m.block_peak.push_back(m.fixed_peak + stored_total + scale * big(rng));
    m.recompute_cost.push_back(seconds(rng));
    stored_total += saved + kept;
  }
  m.head_peak = m.fixed_peak + stored_total + scale * big(rng);
  return m;
}

struct BruteForce {
  bool feasible = false;
  double cost = 0;
};

BruteForce Brute(const ChainMemoryModel& m, int64_t budget) {
  const int n = m.num_blocks();
  BruteForce best;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    std::vector<bool> flags(n);
    double cost = 0;
    for (int i = 0; i < n; ++i) {
      flags[i] = (mask >> i) & 1u;
      if (flags[i]) cost += m.recompute_cost[i];
    }
    if (m.PeakUnits(flags) > budget) continue;
    if (!best.feasible || cost < best.cost) best = {true, cost};
  }
  return best;
}

int64_t MinimumPeak(const ChainMemoryModel& m) {
  const int n = m.num_blocks();
  int64_t least = INT64_MAX;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    std::vector<bool> flags(n);
    for (int i = 0; i < n; ++i) flags[i] = (mask >> i) & 1u;
    least = std::min(least, m.PeakUnits(flags));
  }
  return least;
}

TEST(CheckpointSolver, EqualsBruteForceOnRandomHeterogeneousChains) {
  std::mt19937 rng(12345);
  int compared = 0, infeasible = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 1 + trial % 14;  // chains of 1..14 blocks
    const ChainMemoryModel m = RandomChain(rng, n, 1);
    const int64_t lowest = MinimumPeak(m);
    const int64_t highest = m.PeakUnits(std::vector<bool>(n, false));
    for (int64_t budget = lowest - 3; budget <= highest + 2;
         budget += std::max<int64_t>(1, (highest - lowest) / 25)) {
      const CheckpointSolution s = SolveCheckpoints(m, budget);
      const BruteForce b = Brute(m, budget);
      ASSERT_EQ(s.feasible, b.feasible) << "n=" << n << " budget=" << budget;
      if (!b.feasible) {
        EXPECT_LT(budget, lowest);  // only budgets below the least possible peak fail
        ++infeasible;
        continue;
      }
      EXPECT_NEAR(s.recompute_cost, b.cost, 1e-9) << "n=" << n << " budget=" << budget;
      EXPECT_LE(m.PeakUnits(s.checkpointed), budget);  // the returned set really fits
      EXPECT_EQ(s.peak_units, m.PeakUnits(s.checkpointed));
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000);
  EXPECT_GT(infeasible, 100);
}

TEST(CheckpointSolver, MicroBatchChoiceEqualsBruteForce) {
  std::mt19937 rng(777);
  std::uniform_real_distribution<double> seconds(1.0, 10.0);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + trial % 9;
    std::vector<MicroBatchOption> options;
    for (int64_t b : {1, 2, 4}) {
      // Activations grow with b: larger micro-batches need more memory.
      MicroBatchOption o{b, RandomChain(rng, n, b), 0, seconds(rng) * static_cast<double>(b)};
      options.push_back(o);
    }
    for (int64_t budget = 20; budget <= 3000; budget += 37) {
      for (auto& o : options) o.budget_units = budget;
      const std::vector<MicroBatchChoice> ranked = RankMicroBatches(options);
      const MicroBatchChoice choice = ranked.empty() ? MicroBatchChoice{} : ranked.front();
      double best = -1;
      for (const auto& o : options) {
        const BruteForce b = Brute(o.model, budget);
        if (!b.feasible) continue;
        const double per_sample = (o.base_seconds + b.cost) / static_cast<double>(o.micro_batch);
        if (best < 0 || per_sample < best) best = per_sample;
      }
      ASSERT_EQ(choice.option >= 0, best >= 0) << "budget " << budget;
      if (best >= 0) {
        EXPECT_NEAR(choice.seconds_per_sample, best, 1e-9) << "budget " << budget;
      }
    }
  }
}

TEST(CheckpointSolver, HomogeneousChainCheckpointsTheFewestBlocksFirst) {
  // 8 equal blocks: each stores 10 units and keeps 2 when checkpointed (saves 8).
  ChainMemoryModel m;
  m.fixed_peak = 5;
  for (int i = 0; i < 8; ++i) {
    m.block_peak.push_back(10 * i + 15);
    m.saved.push_back(8);
    m.recompute_extra.push_back(2);
    m.recompute_cost.push_back(1.0);
  }
  m.head_peak = 80 + 20;  // all 8 blocks stored + 20 for the head
  // Budget 80: the head needs 20 units saved -> 3 checkpoints (24 units).
  const CheckpointSolution s = SolveCheckpoints(m, 80);
  ASSERT_TRUE(s.feasible);
  EXPECT_EQ(s.recompute_cost, 3.0);
  EXPECT_EQ(s.checkpointed,
            (std::vector<bool>{true, true, true, false, false, false, false, false}));
}

}  // namespace
}  // namespace headroom
