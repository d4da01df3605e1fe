#include "planner/simulate/step_size_bound.h"

#include <fmt/format.h>

#include "planner/core/limits.h"

namespace headroom {

double StepBytesCeiling(const OpGraph& graph, const ShapeEnv& env) {
  double elements = 0;
  for (int t = 0; t < graph.num_tensors(); ++t)
    elements += graph.tensor(TensorId{t}).shape.NumelBound(env);
  double parameters = 0;
  for (TensorId p : graph.Parameters()) parameters += graph.tensor(p).shape.NumelBound(env);
  return 24 * elements + 16 * parameters;
}

bool WithinStepSizeLimit(const OpGraph& graph, const ShapeEnv& env) {
  return StepBytesCeiling(graph, env) <= limits::kMaxStepBytes;
}

std::optional<Error> CheckStepSize(const OpGraph& graph, const ShapeEnv& env) {
  if (WithinStepSizeLimit(graph, env)) return std::nullopt;
  return MakeError(fmt::format(
      "too large to plan: a training step at micro-batch {} and sequence length {} would need "
      "more than 2^62 bytes",
      env.micro_batch, env.seq_len));
}

}  // namespace headroom
