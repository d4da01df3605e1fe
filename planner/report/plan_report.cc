#include "planner/report/plan_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/core/byte_units.h"
#include "planner/report/prediction_report.h"

namespace headroom {
namespace {

int64_t SlidingLayerCount(const ModelSpec& model) {
  int64_t n = 0;
  for (int64_t i = 0; i < model.num_layers; ++i) n += model.is_sliding_layer(i);
  return n;
}

ReportInputs ReportOf(const PlanRequest& request, const PlanOutcome& o) {
  return {request.model.name,
          o.plan.config,
          request.device,
          o.prediction,
          o.time,
          o.plan.global_batch,
          o.search ? &*o.search : nullptr,
          ChooseAttentionKernel(request.model, AttentionCallOf(o.plan.config)),
          ChooseWindowAttentionKernel(request.model, o.plan.config),
          SlidingLayerCount(request.model),
          request.model.num_layers};
}

bool NothingFits(const PlanOutcome& o) { return o.search && !o.search->feasible; }

std::string NoPlanFitsHeader(const PlanRequest& request, const PlanOutcome& o) {
  const std::optional<CheckpointPolicy>& fixed = o.options->fixed_checkpoint;
  return fmt::format(
      "NO PLAN FITS {} on {}: the smallest plan (micro-batch 1, {}) needs {} more than the "
      "usable {}.\n\n",
      request.model.name, request.device.name,
      fixed ? "checkpoint " + fixed->ToString() : "every block checkpointed",
      FormatBytes(o.search->shortfall_bytes), FormatBytes(o.search->usable_bytes));
}

std::string SuggestionsText(const PlanOutcome& o) {
  if (o.suggestions.empty()) return "";
  std::string out =
      fmt::format("\nWhat would make it fit (smallest plan of each, against {} usable):\n",
                  FormatBytes(o.search->usable_bytes));
  for (const Suggestion& s : o.suggestions) {
    out += fmt::format("  {:<4} {:<60} {:>12}\n", s.fits ? "fits" : "no", s.change,
                       FormatBytes(s.peak_bytes));
  }
  return out;
}

}  // namespace

std::string FormatPlanText(const PlanRequest& request, const PlanOutcome& outcome) {
  const std::string header = NothingFits(outcome) ? NoPlanFitsHeader(request, outcome) : "";
  return header + FormatPredictionText(ReportOf(request, outcome)) + SuggestionsText(outcome);
}

nlohmann::json PlanJson(const PlanRequest& request, const PlanOutcome& outcome) {
  nlohmann::json j = PredictionJson(ReportOf(request, outcome));
  if (NothingFits(outcome)) {
    j["suggestions"] = nlohmann::json::array();
    for (const Suggestion& s : outcome.suggestions) {
      j["suggestions"].push_back(
          {{"change", s.change}, {"peak_bytes", s.peak_bytes}, {"fits", s.fits}});
    }
  }
  return j;
}

StackExport ExportPlan(ExportTarget target, const PlanOutcome& outcome) {
  const Plan& plan = outcome.plan;
  const bool all = plan.checkpoints_all();
  StackExport out;
  out.config = target == ExportTarget::kHuggingFace
                   ? HfTrainingArguments(plan.config, all)
                   : DeepSpeedConfig(plan.config, plan.global_batch);
  out.notes.push_back(
      fmt::format("{} checkpoints all blocks or none; planned {}{}",
                  NameIn(kExportTargetTitles, target), all ? "all" : "none",
                  outcome.fits() ? "" : " (NO PLAN FITS: see `headroom plan` without --emit)"));
  if (target == ExportTarget::kDeepSpeed && all)
    out.notes.push_back(
        "enable gradient checkpointing in the model (model.gradient_checkpointing_enable())");
  return out;
}

std::string NarrowToExportable(ExportTarget target, Precision requested, bool bf16_supported,
                               SearchOptions& options) {
  options.all_or_none = true;
  const std::vector<Precision> wanted =
      options.precisions.empty() ? std::vector<Precision>{requested} : options.precisions;
  options.precisions = ExportablePrecisions(target, wanted, bf16_supported);
  if (std::find(wanted.begin(), wanted.end(), options.precisions.front()) != wanted.end())
    return "";
  return fmt::format("{} cannot run {}; planned with {}", NameIn(kExportTargetTitles, target),
                     PrecisionName(requested), PrecisionName(options.precisions.front()));
}

}  // namespace headroom
