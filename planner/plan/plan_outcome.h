// What `plan` and `simulate` compute for a request: the plan the request states,
// predicted, or the fastest plan that fits, solved for; and, when nothing fits, what
// would. The one result every output (report, JSON, plan file, exports, timeline) reads.
#pragma once

#include "planner/plan/layer.h"

#include <optional>
#include <vector>

#include "models/build_graph.h"
#include "planner/core/plan.h"
#include "planner/plan/plan_advice.h"
#include "planner/plan/plan_file.h"
#include "planner/plan/plan_request.h"
#include "planner/solve/plan_search.h"

namespace headroom {

struct PlanOutcome {
  Plan plan;
  StepPrediction prediction;
  StepTime time;
  std::optional<SearchResult> search;    // set when the solver chose the plan (its
                                         // prediction moved to `prediction`)
  std::optional<SearchOptions> options;  // the solver's, likewise
  std::vector<Suggestion> suggestions;   // when solved and nothing fits
  // The graph `prediction` ran on when the solver's plan runs another than the request's
  // (a KV cache, copied head views: models/layer_builder.h); null: the request's.
  std::shared_ptr<const OpGraph> graph;
  // The reference paths the graph assumes (OpGraph::assumptions).
  std::vector<std::string> assumptions;
  // One rule for a typed plan and a solved one: a plan fits when it runs without running
  // out of memory and its peak (the device's on a GPU, PeakAgainstBudget) is within the
  // device's memory less the margin.
  double margin = kDefaultMargin;
  int64_t usable_bytes = 0;
  bool within_margin = false;

  bool fits() const { return within_margin; }
};

// Solves when `options` is set (with its margin), else predicts the request's own plan on
// `graph` (built from the request), held to `margin`. Errors: a checkpoint policy that
// names blocks the graph lacks.
Result<PlanOutcome> PlanFor(const PlanRequest& request, const OpGraph& graph,
                            const std::optional<SearchOptions>& options,
                            double margin = kDefaultMargin);

// The plan file of an outcome: its inputs, decisions and predictions.
PlanFile ToPlanFile(const PlanRequest& request, const PlanOutcome& outcome);

}  // namespace headroom
