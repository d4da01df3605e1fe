#include "planner/report/stack_exports.h"

#include <algorithm>

namespace headroom {
namespace {

const char* HfOptimizer(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kAdamW:
      return "adamw_torch";
    case OptimizerKind::kSgd:
    case OptimizerKind::kSgdMomentum:
      return "sgd";
    case OptimizerKind::kAdafactor:
      return "adafactor";
    case OptimizerKind::kAdamW8bit:
      return "adamw_bnb_8bit";
  }
  return "adamw_torch";
}

bool IsBf16(Precision p) {
  return p == Precision::kAmpBf16 || p == Precision::kBf16 || p == Precision::kMixedBf16;
}
bool IsFp16(Precision p) { return p == Precision::kAmpFp16 || p == Precision::kMixedFp16; }

}  // namespace

std::vector<Precision> ExportPrecisions(ExportTarget target) {
  if (target == ExportTarget::kHuggingFace)
    return {Precision::kFp32, Precision::kAmpBf16, Precision::kAmpFp16};
  return {Precision::kFp32, Precision::kMixedBf16, Precision::kMixedFp16};
}

std::vector<Precision> ExportablePrecisions(ExportTarget target,
                                            const std::vector<Precision>& wanted,
                                            bool bf16_supported) {
  const std::vector<Precision> allowed = ExportPrecisions(target);
  std::vector<Precision> out;
  for (Precision p : wanted) {
    if (std::find(allowed.begin(), allowed.end(), p) != allowed.end()) out.push_back(p);
  }
  if (out.empty()) {
    for (Precision p : allowed) {
      if (p != Precision::kFp32 && IsBf16(p) == bf16_supported) out.push_back(p);
    }
  }
  return out;
}

nlohmann::json HfTrainingArguments(const TrainingConfig& c, bool checkpoint_all) {
  nlohmann::json j = {
      {"per_device_train_batch_size", c.micro_batch},
      {"gradient_accumulation_steps", c.grad_accum_steps},
      {"gradient_checkpointing", checkpoint_all},
      {"bf16", IsBf16(c.precision)},
      {"fp16", IsFp16(c.precision)},
      {"optim", HfOptimizer(c.optimizer)},
  };
  if (c.optimizer == OptimizerKind::kSgdMomentum) j["optim_args"] = "momentum=0.9";
  return j;
}

nlohmann::json DeepSpeedConfig(const TrainingConfig& c, int64_t global_batch) {
  nlohmann::json j = {
      {"train_batch_size", global_batch},
      {"train_micro_batch_size_per_gpu", c.micro_batch},
      {"gradient_accumulation_steps", c.grad_accum_steps},
      {"bf16", {{"enabled", IsBf16(c.precision)}}},
      // PyTorch GradScaler's defaults: initial scale 2^16, growth interval 2000.
      {"fp16",
       {{"enabled", IsFp16(c.precision)},
        {"loss_scale", 0},
        {"initial_scale_power", 16},
        {"loss_scale_window", 2000},
        {"hysteresis", 1},
        {"min_loss_scale", 1}}},
      {"zero_optimization", {{"stage", 0}}},
  };
  if (c.optimizer == OptimizerKind::kAdamW) {
    j["optimizer"] = {{"type", "AdamW"}, {"params", {{"lr", "auto"}, {"weight_decay", "auto"}}}};
  }
  return j;
}

}  // namespace headroom
