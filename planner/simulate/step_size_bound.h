// A ceiling on the bytes of one training step, computed in floating point so that it
// cannot wrap: every tensor of the graph (a repetition held once counted each time it
// runs) live at once at 8 bytes per element, three times
// over (value, gradient, a recomputed or cast copy), plus 16 bytes per parameter for
// optimizer state and master weights. Real peaks are far below it; a step whose ceiling
// passes limits::kMaxStepBytes is refused as too large before any size is computed in
// 64-bit integers.
#pragma once

#include "planner/simulate/layer.h"

#include <optional>

#include "planner/core/result.h"
#include "planner/graph/op_graph.h"

namespace headroom {

double StepBytesCeiling(const OpGraph& graph, const ShapeEnv& env);
bool WithinStepSizeLimit(const OpGraph& graph, const ShapeEnv& env);
// The error says what is too large.
std::optional<Error> CheckStepSize(const OpGraph& graph, const ShapeEnv& env);

}  // namespace headroom
