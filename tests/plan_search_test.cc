// The plan search on real graphs: every plan it returns fits when simulated; the global
// batch is kept exact; impossible budgets are reported with their shortfall.
#include <gtest/gtest.h>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/plan_search.h"

namespace headroom {
namespace {

TEST(PlanSearch, EveryReturnedPlanFitsWhenSimulated) {
  int feasible = 0, infeasible = 0;
  for (const char* model : {"tiny-gpt2", "tiny-llama", "tiny-bert"}) {
    const ModelSpec spec = *LoadCatalogModel(model);
    const OpGraph graph = *BuildGraph(spec, {});
    TrainingConfig base;
    base.seq_len = 128;
    base.precision = Precision::kAmpBf16;
    for (int64_t mib : {470, 480, 490, 500, 520, 560, 640}) {
      const DeviceSpec gpu = CustomGpu(mib << 20);  // 450 MiB of it is the CUDA context
      const SearchResult r = SearchPlan(graph, base, gpu, {.global_batch = 16});
      if (!r.feasible) {
        ++infeasible;
        EXPECT_GT(r.shortfall_bytes, 0);
        continue;
      }
      ++feasible;
      const StepPrediction check = PredictStep(graph, r.config, r.checkpointed, gpu);
      EXPECT_LE(check.device_peak_bytes, r.usable_bytes) << model << " " << mib << " MiB";
      EXPECT_EQ(r.config.micro_batch * r.config.grad_accum_steps, 16);
      EXPECT_GT(r.time.tokens_per_second, 0);
    }
  }
  EXPECT_GT(feasible, 5);
  EXPECT_GT(infeasible, 0);
}

TEST(PlanSearch, MoreMemoryNeverGivesASlowerPlan) {
  const OpGraph graph = *BuildGraph(*LoadCatalogModel("tiny-llama"), {});
  TrainingConfig base;
  base.seq_len = 256;
  double previous = 0;
  for (int64_t mib : {520, 560, 700, 1000, 2000}) {
    const SearchResult r = SearchPlan(graph, base, CustomGpu(mib << 20), {.global_batch = 32});
    ASSERT_TRUE(r.feasible) << mib;
    EXPECT_GE(r.time.tokens_per_second, previous * (1 - 1e-9)) << mib;
    previous = r.time.tokens_per_second;
  }
}

TEST(PlanSearch, BudgetBelowTheMinimumIsInfeasible) {
  const OpGraph graph = *BuildGraph(*LoadCatalogModel("llama-2-7b"), {});
  TrainingConfig base;
  base.precision = Precision::kFp32;
  const SearchResult r = SearchPlan(graph, base, *FindGpu("a100-80gb"), {.global_batch = 8});
  EXPECT_FALSE(r.feasible);
  // Weights, gradients and AdamW states alone are 16 B per parameter: 108 GB > 76 GiB.
  EXPECT_GT(r.shortfall_bytes, 16 * 6'738'415'616 - (80LL << 30));
}

TEST(PlanSearch, FixedPolicyAndAllOrNoneAreRespected) {
  const OpGraph graph = *BuildGraph(*LoadCatalogModel("tiny-gpt2"), {});
  TrainingConfig base;
  base.seq_len = 128;
  const DeviceSpec gpu = CustomGpu(600LL << 20);
  const SearchResult fixed =
      SearchPlan(graph, base, gpu,
                 {.global_batch = 8, .fixed_checkpoint = *CheckpointPolicy::Parse("layers:1")});
  ASSERT_TRUE(fixed.feasible);
  EXPECT_EQ(fixed.checkpointed, (std::vector<bool>{false, true}));
  const SearchResult hf = SearchPlan(graph, base, gpu, {.global_batch = 8, .all_or_none = true});
  ASSERT_TRUE(hf.feasible);
  EXPECT_EQ(hf.checkpointed[0], hf.checkpointed[1]);
}

}  // namespace
}  // namespace headroom
