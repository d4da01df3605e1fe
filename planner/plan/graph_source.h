// The graphs a model runs under the configurations a search considers, each built once
// from the model's spec (see GraphSource in planner/solve/plan_search.h).
#pragma once

#include "planner/plan/layer.h"

#include "models/model_spec.h"
#include "planner/solve/plan_search.h"

namespace headroom {

// Builds the graph of GraphOptionsOf(config) on first use and shares it afterwards; safe
// to call from several threads (capacity sweeps two GPU types at once).
GraphSource GraphsOf(const ModelSpec& model);

}  // namespace headroom
