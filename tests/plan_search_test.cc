// The plan search on real graphs: every plan it returns fits when simulated; the global
// batch is kept exact; impossible budgets are reported with their shortfall.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/plan/plan_advice.h"
#include "planner/plan/plan_request.h"
#include "planner/solve/plan_search.h"
#include "planner/solve/simulation_memo.h"

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
      const StepPrediction check = PredictStep(graph, r.plan.config, r.plan.checkpointed, gpu);
      EXPECT_LE(check.device_peak_bytes, r.usable_bytes) << model << " " << mib << " MiB";
      EXPECT_EQ(r.plan.config.micro_batch * r.plan.config.grad_accum_steps, 16);
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

// `headroom capacity` hands one device's simulations to the next through a memo: the
// searches that share one must return exactly what searches alone return, at every
// budget (the memo holds only what does not depend on the device's memory), and must
// have reused something.
TEST(PlanSearch, ASharedMemoChangesNoPlan) {
  const OpGraph graph = *BuildGraph(*LoadCatalogModel("tiny-llama"), {});
  TrainingConfig base;
  base.seq_len = 256;
  const auto memo = std::make_shared<SimulationMemo>();
  int shared_hits = 0;
  for (int64_t mib : {470, 500, 520, 560, 700, 2000}) {
    const DeviceSpec gpu = CustomGpu(mib << 20);
    const SearchResult alone = SearchPlan(graph, base, gpu, {.global_batch = 32});
    const size_t before = memo->size();
    const SearchResult shared = SearchPlan(graph, base, gpu, {.global_batch = 32, .memo = memo});
    shared_hits += memo->size() == before;
    EXPECT_EQ(shared.feasible, alone.feasible) << mib;
    EXPECT_EQ(shared.plan, alone.plan) << mib;
    EXPECT_EQ(shared.prediction.device_peak_bytes, alone.prediction.device_peak_bytes) << mib;
    EXPECT_EQ(shared.shortfall_bytes, alone.shortfall_bytes) << mib;
    EXPECT_EQ(shared.corrections, alone.corrections) << mib;
  }
  EXPECT_GT(memo->size(), 0u);
  EXPECT_GT(shared_hits, 0);  // a later budget found everything it asked for kept
}

// A budget a quarter of the way from the all-checkpointed peak to the no-checkpoint
// peak: some blocks can stay uncheckpointed. The first plan the model proposes there
// keeps the most live and so has the largest allocator offset; the search must not take
// that offset as everyone's and settle for checkpointing every block.
TEST(PlanSearch, TightBudgetStillLeavesSomeBlocksUncheckpointed) {
  const OpGraph graph = *BuildGraph(*LoadCatalogModel("qwen2.5-0.5b"), {});
  TrainingConfig config;
  config.seq_len = 4096;
  config.precision = Precision::kBf16;
  config.micro_batch = 1;
  config.grad_accum_steps = 8;
  const int n = static_cast<int>(graph.blocks().size());
  const DeviceSpec probe = CustomGpu(int64_t{1} << 42);
  const int64_t all =
      PredictStep(graph, config, std::vector<bool>(n, true), probe).device_peak_bytes;
  const int64_t none =
      PredictStep(graph, config, std::vector<bool>(n, false), probe).device_peak_bytes;
  const double budget = static_cast<double>(all) + 0.25 * static_cast<double>(none - all);
  const DeviceSpec gpu = CustomGpu(static_cast<int64_t>(budget / (1.0 - kDefaultMargin)));
  const SearchResult r = SearchPlan(graph, config, gpu, {.global_batch = 8, .max_micro_batch = 1});
  ASSERT_TRUE(r.feasible);
  const auto checkpointed =
      std::count(r.plan.checkpointed.begin(), r.plan.checkpointed.end(), true);
  EXPECT_LT(checkpointed, n);
  EXPECT_GT(checkpointed, 0);
  EXPECT_LE(PredictStep(graph, r.plan.config, r.plan.checkpointed, gpu).device_peak_bytes,
            r.usable_bytes);
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

TEST(PlanSearch, AnUnevenGlobalBatchIsSplitToTheNearest) {
  std::string note;
  EXPECT_EQ(PerGpuBatch({.global_batch = 7, .num_gpus = 2}, &note), 4);
  EXPECT_NE(note.find("cannot be split evenly"), std::string::npos) << note;
  note.clear();
  EXPECT_EQ(PerGpuBatch({.global_batch = 9, .num_gpus = 4}, &note), 2);
  EXPECT_EQ(PerGpuBatch({.global_batch = 8, .num_gpus = 2}), 4);
}

TEST(PlanSearch, AdviceMeasuresTheSmallestPlanAsTheSearchDoes) {
  // Nothing fits a 455 MiB GPU (450 MiB of it the CUDA context), not even with the
  // sequence halved: the advice's number for that change must be the search's own
  // shortfall for the halved request, plus the budget.
  PlanRequest request{*LoadCatalogModel("tiny-llama"), {}, CustomGpu(455LL << 20)};
  request.config.seq_len = 256;
  const SearchOptions options{.global_batch = 7, .num_gpus = 2};
  const std::vector<Suggestion> advice =
      SuggestFixes(request, *BuildGraph(request.model, GraphOptionsOf(request.config)), options);
  const auto halved = std::find_if(advice.begin(), advice.end(), [](const Suggestion& s) {
    return s.change.rfind("sequence length 128", 0) == 0;
  });
  ASSERT_NE(halved, advice.end());
  EXPECT_FALSE(halved->fits);

  PlanRequest shorter = request;
  shorter.config.seq_len = 128;
  const OpGraph graph = *BuildGraph(shorter.model, GraphOptionsOf(shorter.config));
  const SearchResult r = SearchPlan(graph, shorter.config, shorter.device, options);
  ASSERT_FALSE(r.feasible);
  EXPECT_EQ(r.plan.config.grad_accum_steps, 4);
  EXPECT_EQ(halved->peak_bytes, r.usable_bytes + r.shortfall_bytes);
  EXPECT_EQ(r.usable_bytes, UsableBytes(shorter.device, options.margin));
}

TEST(PlanSearch, AdviceNamesTheStackWhenTheForeachCopyDecides) {
  // A plain loop on CUDA runs torch.optim's foreach AdamW, whose step holds a copy of
  // every exp_avg_sq; HF Trainer's fused AdamW does not. The advice must price the
  // stack change as the search would plan that stack.
  PlanRequest request{*LoadCatalogModel("llama-3.2-1b"), {}, *FindGpu("rtx-4090")};
  request.config.seq_len = 512;
  request.config.precision = Precision::kAmpBf16;
  const SearchOptions options{.global_batch = 8};
  const std::vector<Suggestion> advice =
      SuggestFixes(request, *BuildGraph(request.model, GraphOptionsOf(request.config)), options);
  const auto stack = std::find_if(advice.begin(), advice.end(), [](const Suggestion& s) {
    return s.change.find("--stack hf-trainer") != std::string::npos;
  });
  ASSERT_NE(stack, advice.end());

  // The smallest plan of that stack: micro-batch 1, every block checkpointed (and so no
  // KV cache: transformers turns use_cache off under gradient checkpointing).
  PlanRequest trainer = request;
  trainer.config.stack = Stack::kHfTrainer;
  trainer.config.grad_accum_steps = 8;
  trainer.config.checkpoint = {.kind = CheckpointPolicy::Kind::kAll};
  const OpGraph graph = *BuildGraph(trainer.model, GraphOptionsOf(trainer.config));
  const std::vector<bool> all(graph.blocks().size(), true);
  const int64_t trainer_peak =
      PeakAgainstBudget(PredictStep(graph, trainer.config, all, trainer.device), trainer.device);
  EXPECT_EQ(stack->peak_bytes, trainer_peak);
  EXPECT_EQ(stack->fits, trainer_peak <= UsableBytes(trainer.device, options.margin));

  const OpGraph loop_graph = *BuildGraph(request.model, GraphOptionsOf(request.config));
  const SearchResult loop = SearchPlan(loop_graph, request.config, request.device, options);
  ASSERT_FALSE(loop.feasible);
  // 1.24 G parameters: the fp32 exp_avg_sq copy alone is 4.6 GiB of the step's peak.
  EXPECT_LT(stack->peak_bytes, loop.usable_bytes + loop.shortfall_bytes - (1LL << 30));
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
  EXPECT_EQ(fixed.plan.checkpointed, (std::vector<bool>{false, true}));
  const SearchResult hf = SearchPlan(graph, base, gpu, {.global_batch = 8, .all_or_none = true});
  ASSERT_TRUE(hf.feasible);
  EXPECT_EQ(hf.plan.checkpointed[0], hf.plan.checkpointed[1]);
}

}  // namespace
}  // namespace headroom
