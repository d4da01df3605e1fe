// An imported graph against the built graph of the same model (issue 40: planning an
// imported graph within 2x of a built one's time): Llama-3-8B, bf16 LoRA r16 on q and v,
// sequence 2048, planned for a 64 GiB CPU device. bench/data holds the graph file
// `headroom import` wrote for that regime (models/import/headroom_import.py
// tests/reference/configs/llama-3-8b.json --precision bf16 --lora-rank 16).
//  - the graph: BuildGraph from the catalog spec, or ExpandImportedGraph from the file
//    (read and parsed once, as a cached plan reads it once);
//  - `plan`: the graph, then one prediction of the step (micro-batch 1, nothing
//    checkpointed);
//  - a full solve (SearchPlan, global batch 16) on each graph.
// And a graph with a rolled loop, Qwen3-Next-80B-A3B bf16 LoRA r16 on the DeltaNet and
// attention projections (transformers' reference gated delta rule: 38 ops per 64-token
// chunk in each of 36 layers), planned at 1k, 8k and 32k tokens on a 4 TiB CPU device:
// expanded with its repetitions held once (RepeatedOps) and with every one of them.
#include <benchmark/benchmark.h>

#include "bench/imported_graph_configs.h"
#include "models/build_graph.h"
#include "models/catalog.h"
#include "models/graph_file.h"
#include "models/model_import.h"
#include "planner/core/file_io.h"
#include "planner/simulate/step_prediction.h"
#include "planner/solve/plan_search.h"

namespace headroom {
namespace {

// The builder's role names, the module names PEFT was given at import.
TrainingConfig Config(bool imported) {
  return imported ? bench_graphs::Llama3Lora(1, 2048)
                  : bench_graphs::CpuBf16Lora(1, 2048, {"q", "v"});
}

ModelSpec Spec(bool imported) {
  if (!imported) return *LoadCatalogModel("llama-3-8b");
  Result<std::string> text = ReadRegularFile(bench_graphs::kLlama3, int64_t{1} << 30);
  if (!text) throw std::runtime_error(text.error().message);
  Result<ModelSpec> spec = LoadGraphFile(*text, bench_graphs::kLlama3);
  if (!spec) throw std::runtime_error(spec.error().message);
  return *spec;
}

void BM_Graph(benchmark::State& state, bool imported) {
  const ModelSpec spec = Spec(imported);
  const GraphOptions options = GraphOptionsOf(Config(imported));
  int ops = 0;
  for (auto _ : state) {
    Result<OpGraph> graph = BuildGraph(spec, options);
    if (!graph) {
      state.SkipWithError(graph.error().message.c_str());
      return;
    }
    ops = graph->num_ops();
  }
  state.counters["ops"] = ops;
}

void BM_Plan(benchmark::State& state, bool imported) {
  const ModelSpec spec = Spec(imported);
  const TrainingConfig config = Config(imported);
  const DeviceSpec device = CpuDevice(int64_t{64} << 30);
  int64_t peak = 0;
  for (auto _ : state) {
    Result<OpGraph> graph = BuildGraph(spec, GraphOptionsOf(config));
    if (!graph) {
      state.SkipWithError(graph.error().message.c_str());
      return;
    }
    const std::vector<bool> none(graph->blocks().size(), false);
    peak = PredictStep(*graph, config, none, device).allocated_peak_bytes;
  }
  state.counters["peak_gib"] = static_cast<double>(peak) / (1 << 30);
}

void BM_Solve(benchmark::State& state, bool imported) {
  const ModelSpec spec = Spec(imported);
  const TrainingConfig base = Config(imported);
  Result<OpGraph> graph = BuildGraph(spec, GraphOptionsOf(base));
  if (!graph) {
    state.SkipWithError(graph.error().message.c_str());
    return;
  }
  const DeviceSpec device = CpuDevice(int64_t{64} << 30);
  SearchResult r;
  for (auto _ : state) {
    r = SearchPlan(*graph, base, device, {.global_batch = 16});
    benchmark::DoNotOptimize(r.feasible);
  }
  state.counters["feasible"] = r.feasible;
  state.counters["micro_batch"] = static_cast<double>(r.plan.config.micro_batch);
  state.counters["peak_gib"] = static_cast<double>(r.prediction.allocated_peak_bytes) / (1 << 30);
}

// `plan` on the graph with a loop: the expansion, then one prediction of the step.
void BM_LoopPlan(benchmark::State& state, bool held_once) {
  Result<std::string> text = ReadRegularFile(bench_graphs::kQwen3Next, int64_t{1} << 30);
  if (!text) throw std::runtime_error(text.error().message);
  Result<ImportedGraph> imported = ParseImportedGraph(*text, bench_graphs::kQwen3Next);
  if (!imported) throw std::runtime_error(imported.error().message);
  const TrainingConfig config = bench_graphs::Qwen3NextLora(1, state.range(0));
  const DeviceSpec device = CpuDevice(int64_t{4} << 40);
  int ops = 0;
  int64_t peak = 0;
  for (auto _ : state) {
    Result<OpGraph> graph = ExpandImportedGraph(*imported, GraphOptionsOf(config),
                                                {.hold_repetitions_once = held_once});
    if (!graph) {
      state.SkipWithError(graph.error().message.c_str());
      return;
    }
    ops = graph->num_ops();
    const std::vector<bool> none(graph->blocks().size(), false);
    peak = PredictStep(*graph, config, none, device).allocated_peak_bytes;
  }
  state.counters["ops"] = ops;
  state.counters["peak_gib"] = static_cast<double>(peak) / (1 << 30);
}

BENCHMARK_CAPTURE(BM_LoopPlan, held_once_qwen3_next, true)
    ->Arg(1024)
    ->Arg(8192)
    ->Arg(32768)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LoopPlan, every_repetition_qwen3_next, false)
    ->Arg(1024)
    ->Arg(8192)
    ->Arg(32768)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_Graph, built_llama3_8b, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Graph, imported_llama3_8b, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, built_llama3_8b, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, imported_llama3_8b, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Solve, built_llama3_8b, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Solve, imported_llama3_8b, true)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
