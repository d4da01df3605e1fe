#include "cli/plan_command.h"

#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "models/build_graph.h"
#include "planner/plan/plan_advice.h"
#include "planner/plan/plan_file.h"
#include "planner/core/byte_units.h"
#include "planner/report/prediction_report.h"
#include "planner/report/stack_exports.h"
#include "planner/report/timeline_export.h"

namespace headroom {
namespace {

int Fail(const std::string& message) { return ReportUsageError(message); }

SearchOptions ToSearchOptions(const PlanFlags& f, const PlanRequest& r) {
  SearchOptions o;
  if (f.global_batch > 0) {
    o.global_batch = f.global_batch;
  } else if (f.micro_batch_given || f.grad_accum_given) {
    o.global_batch = f.micro_batch * f.grad_accum;
  }  // else SearchOptions' default
  o.margin = f.margin;
  if (f.precision == "auto") o.precisions = SupportedPrecisions(r.device);
  if (f.checkpoint_given) o.fixed_checkpoint = r.config.checkpoint;
  if (f.micro_batch_given) o.fixed_micro_batch = f.micro_batch;
  if (!f.emit.empty()) {
    const ExportTarget target =
        f.emit == "hf" ? ExportTarget::kHuggingFace : ExportTarget::kDeepSpeed;
    o.all_or_none = true;
    const std::vector<Precision> wanted =
        o.precisions.empty() ? std::vector<Precision>{r.config.precision} : o.precisions;
    o.precisions = ExportablePrecisions(target, wanted, r.device.supports_bf16());
    if (std::find(wanted.begin(), wanted.end(), o.precisions.front()) == wanted.end()) {
      fmt::print(stderr, "headroom: note: {} cannot run {}; planned with {}\n",
                 f.emit == "hf" ? "Hugging Face" : "DeepSpeed", PrecisionName(r.config.precision),
                 PrecisionName(o.precisions.front()));
    }
  }
  return o;
}

PlanFile ToPlanFile(const PlanRequest& r, const TrainingConfig& c, const StepPrediction& p,
                    const StepTime& t, int64_t global_batch, double margin, bool fits) {
  PlanFile f;
  f.model = r.model;
  f.device = r.device.name;
  f.device_memory_bytes = r.device.memory_bytes;
  f.config = c;
  f.global_batch = global_batch;
  f.margin = margin;
  f.fits = fits;
  f.allocated_bytes = p.allocated_peak_bytes;
  f.reserved_bytes = p.reserved_peak_bytes;
  f.device_bytes = p.device_peak_bytes;
  f.peak_phase = p.peak_phase_text;
  for (int i = 0; i < kNumCategories; ++i)
    f.breakdown_bytes[std::string(CategoryName(static_cast<Category>(i)))] = p.breakdown[i];
  f.step_seconds = t.step_seconds;
  f.tokens_per_second = t.tokens_per_second;
  return f;
}

// The checkpoint decision as a policy the plan file and runtime can replay.
CheckpointPolicy PolicyOf(const std::vector<bool>& flags) {
  CheckpointPolicy p;
  bool any = false, all = true;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i]) p.layers.push_back(static_cast<int>(i));
    any = any || flags[i];
    all = all && flags[i];
  }
  p.kind = !any  ? CheckpointPolicy::Kind::kNone
           : all ? CheckpointPolicy::Kind::kAll
                 : CheckpointPolicy::Kind::kLayers;
  if (p.kind != CheckpointPolicy::Kind::kLayers) p.layers.clear();
  return p;
}

}  // namespace

int RunPlanCommand(const PlanFlags& flags, const TimelineOutputs* timeline) {
  auto request = ToPlanRequest(flags);
  if (!request) return Fail(request.error().message);
  if (auto error = ValidateRequest(*request)) return Fail(error->message);
  auto graph = BuildGraph(request->model, GraphOptionsOf(request->config));
  if (!graph) return Fail(graph.error().message);
  const auto checkpointed =
      request->config.checkpoint.Resolve(static_cast<int>(graph->blocks().size()));
  if (!checkpointed) return Fail(checkpointed.error().message);

  const bool solve = flags.auto_plan || !flags.micro_batch_given || !flags.emit.empty();
  TrainingConfig config = request->config;
  StepPrediction prediction;
  StepTime time;
  SearchResult search;
  SearchOptions options;
  std::vector<Suggestion> suggestions;
  int64_t global_batch = config.micro_batch * config.grad_accum_steps;
  if (solve) {
    options = ToSearchOptions(flags, *request);
    if (options.global_batch <= 0) return Fail("--global-batch must be a positive integer");
    if (options.fixed_micro_batch && options.global_batch % *options.fixed_micro_batch != 0) {
      return Fail(fmt::format(
          "--micro-batch {} does not divide --global-batch {}; the global batch is kept exact",
          *options.fixed_micro_batch, options.global_batch));
    }
    search = SearchPlan(*graph, request->config, request->device, options);
    config = search.config;
    config.checkpoint = PolicyOf(search.checkpointed);
    prediction = search.prediction;
    time = search.time;
    global_batch = options.global_batch;
    if (!search.feasible) suggestions = SuggestFixes(*request, options);
  } else {
    prediction = PredictStep(*graph, config, *checkpointed, request->device);
    time = StepTimeModel(*graph, config, request->device).Estimate(*checkpointed);
  }

  const ReportInputs report{
      request->model.name,      config, request->device, prediction, time, global_batch,
      solve ? &search : nullptr};
  if (!flags.emit.empty()) {
    const bool all =
        !prediction.checkpointed.empty() && config.checkpoint.kind == CheckpointPolicy::Kind::kAll;
    const auto json = flags.emit == "hf" ? HfTrainingArguments(config, all)
                                         : DeepSpeedConfig(config, global_batch);
    std::cout << json.dump(2) << "\n";
    fmt::print(stderr, "headroom: note: {} checkpoints all blocks or none; planned {}{}\n",
               flags.emit == "hf" ? "Hugging Face" : "DeepSpeed", all ? "all" : "none",
               search.feasible ? "" : " (NO PLAN FITS: see `headroom plan` without --emit)");
    if (flags.emit == "deepspeed" && all) {
      fmt::print(stderr,
                 "headroom: note: enable gradient checkpointing in the model "
                 "(model.gradient_checkpointing_enable())\n");
    }
  } else if (flags.json) {
    auto j = PredictionJson(report);
    if (solve && !search.feasible) {
      j["suggestions"] = nlohmann::json::array();
      for (const Suggestion& s : suggestions) {
        j["suggestions"].push_back(
            {{"change", s.change}, {"peak_bytes", s.peak_bytes}, {"fits", s.fits}});
      }
    }
    std::cout << j.dump(2) << "\n";
  } else {
    if (solve && !search.feasible) {
      fmt::print(
          "NO PLAN FITS {} on {}: the smallest plan (micro-batch 1, {}) needs {} more than the "
          "usable {}.\n\n",
          request->model.name, request->device.name,
          options.fixed_checkpoint ? "checkpoint " + options.fixed_checkpoint->ToString()
                                   : "every block checkpointed",
          FormatBytes(search.shortfall_bytes), FormatBytes(search.usable_bytes));
    }
    std::cout << FormatPredictionText(report);
    if (!suggestions.empty()) {
      fmt::print("\nWhat would make it fit (smallest plan of each, against {} usable):\n",
                 FormatBytes(search.usable_bytes));
      for (const Suggestion& s : suggestions) {
        fmt::print("  {:<4} {:<60} {:>12}\n", s.fits ? "fits" : "no", s.change,
                   FormatBytes(s.peak_bytes));
      }
    }
  }

  if (!flags.output_plan.empty()) {
    std::ofstream out(flags.output_plan);
    if (!out) return Fail(fmt::format("cannot write the plan file {}", flags.output_plan));
    out << WritePlanYaml(ToPlanFile(*request, config, prediction, time, global_batch,
                                    solve ? options.margin : 0.0,
                                    solve ? search.feasible : prediction.fits));
    if (!flags.json && flags.emit.empty()) fmt::print("\nplan written to {}\n", flags.output_plan);
  }
  if (timeline) {
    const TimelineExportInputs in{prediction.timeline, *graph,
                                  static_cast<int>(config.grad_accum_steps),
                                  prediction.budget_bytes,
                                  fmt::format("{} on {}: memory over two training steps",
                                              request->model.name, request->device.name)};
    std::ofstream csv(timeline->csv_path), svg(timeline->svg_path);
    if (!csv || !svg)
      return Fail(fmt::format("cannot write {} or {}", timeline->csv_path, timeline->svg_path));
    WriteTimelineCsv(in, csv);
    WriteTimelineSvg(in, svg);
    if (!flags.json) {
      fmt::print("\ntimeline: {} ({} events), chart: {}\n", timeline->csv_path,
                 prediction.timeline.events.size(), timeline->svg_path);
    }
  }
  return 0;
}

}  // namespace headroom
