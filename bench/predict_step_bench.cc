// How long one full prediction (graph build, two simulated steps, live-bytes and
// caching-allocator replays) takes; the solver of the next issue calls it many times.
// Run: scripts/bench.sh (writes bench/results/predict_step.json).
#include <benchmark/benchmark.h>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/simulate/step_prediction.h"

namespace headroom {
namespace {

void BM_PredictStep(benchmark::State& state, const char* model, int64_t seq_len,
                    bool checkpoint_all) {
  const ModelSpec spec = *LoadCatalogModel(model);
  const DeviceSpec gpu = *FindGpu("h100-80gb");
  TrainingConfig config;
  config.seq_len = seq_len;
  config.micro_batch = state.range(0);
  int64_t events = 0;
  for (auto _ : state) {
    const OpGraph graph = *BuildGraph(spec, {});
    const StepPrediction p =
        PredictStep(graph, config, std::vector<bool>(graph.blocks().size(), checkpoint_all), gpu);
    events = static_cast<int64_t>(p.timeline.events.size());
    benchmark::DoNotOptimize(p.allocated_peak_bytes);
  }
  state.counters["events"] = static_cast<double>(events);
}

BENCHMARK_CAPTURE(BM_PredictStep, llama_2_7b_s4096, "llama-2-7b", 4096, false)
    ->Arg(1)
    ->Arg(8)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictStep, llama_3_70b_s4096_ckpt, "llama-3-70b", 4096, true)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictStep, gpt2_s1024, "gpt2", 1024, false)
    ->Arg(8)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
