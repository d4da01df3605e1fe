#include "cli/plan_command.h"

#include <iostream>

#include <fmt/format.h>

#include "models/build_graph.h"
#include "planner/core/file_io.h"
#include "planner/core/text_escape.h"
#include "planner/plan/plan_outcome.h"
#include "planner/report/plan_report.h"
#include "planner/report/timeline_export.h"

namespace headroom {
namespace {

int Fail(const std::string& message) { return ReportUsageError(message); }

void PrintOutcome(const PlanFlags& flags, const PlanRequest& request, const PlanOutcome& outcome) {
  if (flags.emit) {
    const StackExport out = ExportPlan(*flags.emit, outcome);
    PrintReport(out.text);
    for (const std::string& note : out.notes) fmt::print(stderr, "headroom: note: {}\n", note);
  } else if (flags.json) {
    std::cout << JsonText(PlanJson(request, outcome)) << "\n";
  } else {
    PrintReport(FormatPlanText(request, outcome));
  }
}

int WriteTimeline(const TimelineOutputs& paths, const PlanRequest& request, const OpGraph& graph,
                  const PlanOutcome& outcome, bool quiet) {
  const StepPrediction& p = outcome.prediction;
  const TimelineExportInputs in{p.timeline,
                                graph,
                                outcome.plan.config.grad_accum_steps,
                                p.budget_bytes,
                                fmt::format("{} on {}: memory over two training steps",
                                            request.model.name, request.device.name),
                                request.device.AllocationGranularity()};
  auto csv = [&](std::ostream& out) { WriteTimelineCsv(in, out); };
  auto svg = [&](std::ostream& out) { WriteTimelineSvg(in, out); };
  if (auto error = WriteFileAtomically(paths.csv_path, csv))
    return ReportRunFailure(error->message);
  if (auto error = WriteFileAtomically(paths.svg_path, svg))
    return ReportRunFailure(error->message);
  if (!quiet) {
    fmt::print("\ntimeline: {} ({} events), chart: {}\n", TerminalEscaped(paths.csv_path),
               p.timeline.events.size(), TerminalEscaped(paths.svg_path));
  }
  return 0;
}

}  // namespace

int RunPlanCommand(const PlanFlags& flags, const TimelineOutputs* timeline) {
  const auto timeline_path = [&](const std::string TimelineOutputs::*path) {
    return timeline ? std::optional(timeline->*path) : std::nullopt;
  };
  if (auto error = CheckOutputFlags({{"-o", flags.output_plan},
                                     {"--csv", timeline_path(&TimelineOutputs::csv_path)},
                                     {"--svg", timeline_path(&TimelineOutputs::svg_path)}}))
    return Fail(error->message);
  auto request = ToPlanRequest(flags);
  if (!request) return Fail(request.error().message);
  if (auto error = ValidateRequest(*request)) return Fail(error->message);
  auto graph = BuildGraph(request->model, GraphOptionsOf(request->config));
  if (!graph) return Fail(graph.error().message);
  auto options = ToSearchOptions(flags, *request);
  if (!options) return Fail(options.error().message);
  auto outcome = PlanFor(*request, *graph, *options, flags.margin.value_or(kDefaultMargin));
  if (!outcome) return Fail(outcome.error().message);
  if (flags.emit && !outcome->fits()) {
    // Nothing to hand an engine: the report says what would fit.
    PrintReport(FormatPlanText(*request, *outcome));
    return Fail(fmt::format("no plan fits, so there is nothing to export to {}",
                            NameIn(kExportTargetTitles, *flags.emit)));
  }

  PrintOutcome(flags, *request, *outcome);
  if (flags.output_plan) {
    if (auto error =
            WriteFileAtomically(*flags.output_plan, WritePlanYaml(ToPlanFile(*request, *outcome))))
      return ReportRunFailure(error->message);
    if (!flags.json && !flags.emit && *flags.output_plan != "-")
      fmt::print("\nplan written to {}\n", TerminalEscaped(*flags.output_plan));
  }
  // The timeline's ops are those of the graph the prediction ran on.
  const OpGraph& ran = outcome->graph ? *outcome->graph : *graph;
  if (timeline) return WriteTimeline(*timeline, *request, ran, *outcome, flags.json);
  return 0;
}

}  // namespace headroom
