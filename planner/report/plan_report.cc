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
          request.model.num_layers,
          o.assumptions,
          o.fits(),
          o.usable_bytes,
          o.margin};
}

std::string TorchDType(DType d) {
  return d == DType::kBF16  ? "torch.bfloat16"
         : d == DType::kF16 ? "torch.float16"
                            : "torch.float32";
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
  switch (target) {
    case ExportTarget::kHuggingFace:
      out.text = HfTrainingArguments(plan.config, all, plan.global_batch).dump(2) + "\n";
      break;
    case ExportTarget::kDeepSpeed:
      out.text = DeepSpeedConfig(plan.config, plan.global_batch).dump(2) + "\n";
      break;
    case ExportTarget::kAccelerateFsdp:
      out.text = AccelerateFsdpConfig(plan.config, all);
      if (plan.config.precision == Precision::kBf16)
        out.notes.push_back("load the model in bf16 (from_pretrained(..., dtype=torch.bfloat16))");
      break;
    case ExportTarget::kTorchrun:
      out.text = TorchrunCommand(plan.config.parallel, "train.py") + "\n";
      out.notes.push_back(fmt::format(
          "train.py: your training script; each rank runs micro-batch {} x {} accumulation "
          "under {}",
          plan.config.micro_batch, plan.config.grad_accum_steps,
          ShardingName(plan.config.parallel.sharding)));
      if (const std::optional<FsdpPolicy> policy = FsdpPolicyOf(plan.config))
        out.notes.push_back(
            fmt::format("train.py: fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype={}, "
                        "reduce_dtype={})) on every unit, as planned",
                        TorchDType(policy->param_dtype),
                        policy->reduce_dtype ? TorchDType(*policy->reduce_dtype) : "None"));
      break;
  }
  out.notes.push_back(fmt::format("{} checkpoints all blocks or none; planned {}",
                                  NameIn(kExportTargetTitles, target), all ? "all" : "none"));
  if (target == ExportTarget::kDeepSpeed && all)
    out.notes.push_back(
        "enable gradient checkpointing in the model (model.gradient_checkpointing_enable())");
  return out;
}

std::string NarrowToExportable(ExportTarget target, std::optional<Sharding> sharding,
                               Precision requested, bool bf16_supported, SearchOptions& options) {
  options.all_or_none = true;
  if (target == ExportTarget::kHuggingFace && sharding && HfRunsDeepSpeed(*sharding)) {
    target = ExportTarget::kDeepSpeed;
  } else if (target == ExportTarget::kHuggingFace && !sharding && options.gpu_count) {
    options.gpu_count->schemes = {Sharding::kDdp, Sharding::kFsdpNoReshard, Sharding::kFsdp};
  }
  const std::vector<Precision> wanted =
      options.precisions.empty() ? std::vector<Precision>{requested} : options.precisions;
  options.precisions = ExportablePrecisions(target, wanted, bf16_supported);
  if (std::find(wanted.begin(), wanted.end(), options.precisions.front()) != wanted.end())
    return "";
  return fmt::format("{} cannot run {}; planned with {}", NameIn(kExportTargetTitles, target),
                     PrecisionName(requested), PrecisionName(options.precisions.front()));
}

}  // namespace headroom
