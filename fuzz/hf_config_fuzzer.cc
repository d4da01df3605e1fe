// The Hugging Face config.json import (--model config.json): any bytes either fail with
// an error or give a spec whose graph builds, without overflow or an escaped exception, and one
// short step of it predicts.
#include <algorithm>

#include "fuzz/fuzz_input.h"
#include "models/build_graph.h"
#include "models/hf_config.h"
#include "planner/plan/plan_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const Result<ModelSpec> spec = ParseHfConfigJson(fuzz::AsText(data, size), "config.json");
  if (!spec) return 0;
  const Result<OpGraph> graph = BuildGraph(*spec, {});
  if (!graph) return 0;
  fuzz::Require(graph->ParameterCount() > 0, "a valid model has parameters");
  // One short step of it predicts, or is refused as too large: never a wrapped size.
  PlanRequest request{.model = *spec, .config = {}, .device = CpuDevice(int64_t{1} << 40)};
  request.config.seq_len = std::min<int64_t>(16, spec->max_positions);
  const Result<StepPrediction> step = Predict(request);
  if (step) fuzz::Require(step->allocated_peak_bytes > 0, "a step allocates");
  return 0;
}
