#include "planner/plan/plan_outcome.h"

#include <utility>

#include "planner/plan/graph_source.h"
#include "planner/simulate/step_size_bound.h"
#include "planner/solve/gpu_count_search.h"

namespace headroom {

namespace {

Result<PlanOutcome> PlanForGraphs(const PlanRequest& request, const OpGraph& graph,
                                  const std::optional<SearchOptions>& options, double margin) {
  // The stated plan, also when solving: its checkpoint policy must name existing blocks.
  Result<Plan> stated = Plan::FromConfig(request.config, static_cast<int>(graph.blocks().size()));
  if (!stated) return stated.error();
  // The smallest step the solver would try, or the stated one, must be within bounds.
  const int64_t micro_batch = options ? 1 : request.config.micro_batch;
  if (auto error = CheckStepSize(graph, {micro_batch, request.config.seq_len})) return *error;
  PlanOutcome out;
  if (options) {
    SearchOptions solve = *options;
    if (!solve.graph_for) solve.graph_for = GraphsOf(request.model);
    out.search = solve.gpu_count ? SearchGpuCount(graph, request.config, request.device, solve,
                                                  *solve.gpu_count)
                                 : SearchPlan(graph, request.config, request.device, solve);
    if (!out.search->feasible && solve.exact_global_batch && solve.gpu_count &&
        !solve.gpu_count->only_count) {
      std::string note =
          NearestGlobalBatchesNote(graph, request.config, request.device, solve, *solve.gpu_count);
      if (!note.empty()) out.search->batch_note = std::move(note);
    }
    out.options = options;
    out.margin = options->margin;
    out.usable_bytes = out.search->usable_bytes;
    out.within_margin = out.search->feasible;
    out.graph = out.search->graph;
    out.assumptions = (out.graph ? *out.graph : graph).assumptions();
    out.plan = out.search->plan;
    out.prediction = std::move(out.search->prediction);  // one copy of the timeline
    out.time = out.search->time;
    if (!out.search->feasible) out.suggestions = SuggestFixes(request, graph, solve);
    return out;
  }
  out.plan = std::move(*stated);
  out.assumptions = graph.assumptions();
  out.prediction = PredictStep(graph, request.config, out.plan.checkpointed, request.device);
  out.time = StepTimeModel(graph, request.config, request.device).Estimate(out.plan.checkpointed);
  out.margin = margin;
  out.usable_bytes = UsableBytes(request.device, margin);
  out.within_margin =
      out.prediction.fits && PeakAgainstBudget(out.prediction, request.device) <= out.usable_bytes;
  return out;
}

}  // namespace

Result<PlanOutcome> PlanFor(const PlanRequest& request, const OpGraph& graph,
                            const std::optional<SearchOptions>& options, double margin) {
  try {
    return PlanForGraphs(request, graph, options, margin);
  } catch (const GraphUnavailable& e) {
    return MakeError(e.what());
  }
}

PlanFile ToPlanFile(const PlanRequest& request, const PlanOutcome& outcome) {
  const StepPrediction& p = outcome.prediction;
  PlanFile f;
  f.model = request.model;
  f.device = request.device.name;
  f.device_memory_bytes = request.device.memory_bytes;
  f.config = outcome.plan.config;
  f.global_batch = outcome.plan.global_batch;
  f.margin = outcome.margin;
  f.fits = outcome.fits();
  f.allocated_bytes = p.allocated_peak_bytes;
  f.reserved_bytes = p.reserved_peak_bytes;
  f.device_bytes = p.device_peak_bytes;
  f.peak_phase = p.peak_phase_text;
  for (int i = 0; i < kNumCategories; ++i)
    f.breakdown_bytes[std::string(CategoryName(static_cast<Category>(i)))] = p.breakdown[i];
  f.step_seconds = outcome.time.step_seconds;
  f.tokens_per_second = outcome.time.tokens_per_second;
  return f;
}

}  // namespace headroom
