// The graphs a model runs under the configurations a search considers, each built once
// from the model's spec (see GraphSource in planner/solve/plan_search.h).
#pragma once

#include "planner/plan/layer.h"

#include <stdexcept>

#include "models/model_spec.h"
#include "planner/solve/plan_search.h"

namespace headroom {

// A graph the search asked for that the model cannot give: an imported model whose import
// for that configuration failed, or a graph file recorded for another one. PlanFor returns
// it as the plan's error.
struct GraphUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Builds the graph of GraphOptionsOf(config) on first use and shares it afterwards; safe
// to call from several threads (capacity sweeps two GPU types at once). Throws
// GraphUnavailable for an imported model that has no graph for `config`.
GraphSource GraphsOf(const ModelSpec& model);

}  // namespace headroom
