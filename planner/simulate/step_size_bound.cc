#include "planner/simulate/step_size_bound.h"

#include <fmt/format.h>

#include "planner/core/limits.h"

namespace headroom {

double StepBytesCeiling(const OpGraph& graph, const ShapeEnv& env) {
  // A repetition held once (RepeatedOps) stands for its `times`.
  const std::vector<int64_t> executions = graph.ExecutionsPerOp();
  double elements = 0;
  for (int t = 0; t < graph.num_tensors(); ++t) {
    const TensorInfo& info = graph.tensor(TensorId{t});
    const double times =
        info.producer.valid() ? static_cast<double>(executions[info.producer.value]) : 1.0;
    elements += times * info.shape.NumelBound(env);
  }
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
