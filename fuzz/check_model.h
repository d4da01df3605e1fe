// What the two model readers' harnesses check: a rejected input has an error that says
// what is wrong; an accepted spec's graph builds with parameters, and one short step
// predicts or is refused as too large, never a wrapped size.
#pragma once

#include <algorithm>
#include <cstdint>

#include "fuzz/fuzz_input.h"
#include "models/build_graph.h"
#include "planner/plan/plan_request.h"

namespace headroom::fuzz {

inline void CheckModel(const ModelSpec& spec) {
  const Result<OpGraph> graph = BuildGraph(spec, {});
  if (!graph) return;
  Require(graph->ParameterCount() > 0, "a valid model has parameters");
  PlanRequest request{.model = spec, .config = {}, .device = CpuDevice(int64_t{1} << 40)};
  request.config.seq_len = std::min<int64_t>(16, spec.max_positions);
  const Result<StepPrediction> step = Predict(request);
  if (step) Require(step->allocated_peak_bytes > 0, "a step allocates");
}

inline void CheckModelOrError(const Result<ModelSpec>& spec) {
  if (spec)
    CheckModel(*spec);
  else
    Require(!spec.error().message.empty(), "an error says what is wrong");
}

}  // namespace headroom::fuzz
