// Solver benchmarks (scripts/bench.sh writes them to bench/results/*.json):
//  - a full solve (profiling, the checkpoint DP per micro-batch, verification by the
//    full simulator) for llama-3-70b at sequence 4096, global batch 64 (micro-batches
//    1..64); target <= 20 ms on one core; for the default stack (a PyTorch loop) and
//    for headroom's own runtime;
//  - the same for Llama 3.1 405B (126 layers, the catalog entry); target <= 100 ms;
//  - `--gpus auto` for llama-3-70b full fine-tuning (mixed-bf16, sequence 4096, global
//    batch 64, H100): the fewest ranks and the scheme; target <= 10x the full solve of
//    the same request on one GPU (which finds nothing fits) and <= 10x the QLoRA solve;
//  - recomputation overhead of the solver's checkpoint set against "checkpoint every
//    block" and sqrt(n) evenly spaced checkpoints, each at the budget the baseline needs.
#include <cmath>

#include <benchmark/benchmark.h>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/solve/gpu_count_search.h"
#include "planner/solve/plan_search.h"

namespace headroom {
namespace {

void BM_FullSolve(benchmark::State& state, ModelSpec spec, DeviceSpec device,
                  Stack stack = Stack::kPytorch) {
  TrainingConfig base;
  base.stack = stack;
  base.seq_len = 4096;
  base.precision = Precision::kBf16;
  base.fine_tune = {.mode = FineTuneMode::kQLora, .lora_rank = 16};
  const OpGraph graph = *BuildGraph(spec, GraphOptionsOf(base));
  SearchResult r;
  for (auto _ : state) {
    r = SearchPlan(graph, base, device, {.global_batch = 64});
    benchmark::DoNotOptimize(r.feasible);
  }
  state.counters["feasible"] = r.feasible;
  state.counters["micro_batch"] = static_cast<double>(r.plan.config.micro_batch);
  state.counters["checkpointed_blocks"] =
      static_cast<double>(std::count(r.plan.checkpointed.begin(), r.plan.checkpointed.end(), true));
  state.counters["corrections"] = r.corrections;
}

// llama-3-70b, full fine-tune in mixed-bf16 on H100s: one GPU (nothing fits), or the
// fewest ranks with `--gpus auto`.
void BM_FullFineTuneSolve(benchmark::State& state, bool auto_gpus) {
  const ModelSpec spec = *LoadCatalogModel("llama-3-70b");
  const DeviceSpec device = *FindGpu("h100-80gb");
  TrainingConfig base;
  base.seq_len = 4096;
  base.precision = Precision::kMixedBf16;
  const OpGraph graph = *BuildGraph(spec, GraphOptionsOf(base));
  SearchOptions options{.global_batch = 64};
  SearchResult r;
  for (auto _ : state) {
    r = auto_gpus ? SearchGpuCount(graph, base, device, options, GpuCountOptions{})
                  : SearchPlan(graph, base, device, options);
    benchmark::DoNotOptimize(r.feasible);
  }
  state.counters["feasible"] = r.feasible;
  state.counters["gpus"] = static_cast<double>(r.plan.config.parallel.gpus);
}
BENCHMARK_CAPTURE(BM_FullFineTuneSolve, llama_3_70b_mixed_bf16_h100_one_gpu, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FullFineTuneSolve, llama_3_70b_mixed_bf16_h100_gpus_auto, true)
    ->Unit(benchmark::kMillisecond);

// Steps 1-2 only: profiling and the checkpoint DP over every micro-batch, without the
// verification by full simulation.
void BM_RankCandidates(benchmark::State& state, ModelSpec spec, DeviceSpec device) {
  TrainingConfig base;
  base.seq_len = 4096;
  base.precision = Precision::kBf16;
  base.fine_tune = {.mode = FineTuneMode::kQLora, .lora_rank = 16};
  const OpGraph graph = *BuildGraph(spec, GraphOptionsOf(base));
  size_t candidates = 0;
  for (auto _ : state) {
    candidates = RankCandidates(graph, base, device, {.global_batch = 64}).size();
    benchmark::DoNotOptimize(candidates);
  }
  state.counters["candidates"] = static_cast<double>(candidates);
}

BENCHMARK_CAPTURE(BM_RankCandidates, llama_3_70b_qlora_h100_s4096, *LoadCatalogModel("llama-3-70b"),
                  *FindGpu("h100-80gb"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RankCandidates, llama_3_1_405b_qlora_320gb_s4096,
                  *LoadCatalogModel("llama-3.1-405b"), CustomGpu(320LL << 30))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FullSolve, llama_3_70b_qlora_h100_s4096, *LoadCatalogModel("llama-3-70b"),
                  *FindGpu("h100-80gb"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FullSolve, llama_3_1_405b_qlora_320gb_s4096,
                  *LoadCatalogModel("llama-3.1-405b"), CustomGpu(320LL << 30))
    ->Unit(benchmark::kMillisecond);
// The same solve for headroom's own runtime (reentrant checkpointing, per-parameter
// optimizer states): the work the solver did before stacks existed.
BENCHMARK_CAPTURE(BM_FullSolve, llama_3_70b_qlora_h100_s4096_headroom_stack,
                  *LoadCatalogModel("llama-3-70b"), *FindGpu("h100-80gb"), Stack::kHeadroom)
    ->Unit(benchmark::kMillisecond);

// Recomputation share of the step at equal budgets: the solver's checkpoint set,
// "checkpoint every block" and sqrt(n) evenly spaced checkpoints (micro-batch 1, 8
// micro-batches). The budget sits `fraction` of the way from the all-checkpointed peak
// to the no-checkpoint peak; a baseline that does not fit reports -1.
void BM_RecomputeOverhead(benchmark::State& state, const char* model, double fraction) {
  const ModelSpec spec = *LoadCatalogModel(model);
  TrainingConfig config;
  config.seq_len = 4096;
  config.precision = Precision::kBf16;
  config.micro_batch = 1;
  config.grad_accum_steps = 8;
  const OpGraph graph = *BuildGraph(spec, {});
  const int n = static_cast<int>(graph.blocks().size());
  const std::vector<bool> all(n, true), none(n, false);
  std::vector<bool> sqrt_n(n, false);
  const int k = static_cast<int>(std::lround(std::sqrt(n)));
  for (int i = 0; i < k; ++i) sqrt_n[i * n / k] = true;
  const DeviceSpec probe = CustomGpu(int64_t{1} << 42);
  auto peak = [&](const std::vector<bool>& flags) {
    return PredictStep(graph, config, flags, probe).device_peak_bytes;
  };
  const double budget =
      static_cast<double>(peak(all)) + fraction * static_cast<double>(peak(none) - peak(all));
  // A GPU whose usable memory (after the 5% margin) is the budget.
  const DeviceSpec gpu = CustomGpu(static_cast<int64_t>(budget / (1.0 - kDefaultMargin)));
  const StepTimeModel time(graph, config, gpu);
  auto pct = [&](const std::vector<bool>& flags) {
    if (static_cast<double>(peak(flags)) > budget) return -1.0;
    const StepTime t = time.Estimate(flags);
    return 100.0 * 8 * t.recompute_seconds / t.step_seconds;
  };
  SearchResult r;
  for (auto _ : state) {
    r = SearchPlan(graph, config, gpu, {.global_batch = 8, .max_micro_batch = 1});
    benchmark::DoNotOptimize(r.feasible);
  }
  state.counters["solver_recompute_pct"] = r.feasible ? pct(r.plan.checkpointed) : -1;
  state.counters["all_blocks_recompute_pct"] = pct(all);
  state.counters["sqrt_n_recompute_pct"] = pct(sqrt_n);
  state.counters["solver_checkpointed"] =
      static_cast<double>(std::count(r.plan.checkpointed.begin(), r.plan.checkpointed.end(), true));
}

BENCHMARK_CAPTURE(BM_RecomputeOverhead, llama_2_7b_budget_25pct, "llama-2-7b", 0.25)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_RecomputeOverhead, llama_2_7b_budget_75pct, "llama-2-7b", 0.75)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_RecomputeOverhead, llama_2_7b_budget_90pct, "llama-2-7b", 0.90)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_RecomputeOverhead, mistral_7b_budget_25pct, "mistral-7b", 0.25)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_RecomputeOverhead, mistral_7b_budget_75pct, "mistral-7b", 0.75)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_RecomputeOverhead, qwen2_5_0_5b_budget_25pct, "qwen2.5-0.5b", 0.25)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_RecomputeOverhead, qwen2_5_0_5b_budget_75pct, "qwen2.5-0.5b", 0.75)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace headroom
