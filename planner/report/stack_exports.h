// Exports of a plan for people who train with other stacks: Hugging Face
// TrainingArguments fields and a DeepSpeed config. Neither can say "checkpoint these
// blocks": both take all or none, so plans for them are searched with that constraint
// (SearchOptions::all_or_none), and each stack has its own precision regimes.
#pragma once

#include "planner/report/layer.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "planner/core/enum_table.h"
#include "planner/core/training_config.h"

namespace headroom {

enum class ExportTarget { kHuggingFace, kDeepSpeed };
inline constexpr EnumName<ExportTarget> kExportTargetNames[] = {
    {ExportTarget::kHuggingFace, "hf"}, {ExportTarget::kDeepSpeed, "deepspeed"}};
inline constexpr EnumName<ExportTarget> kExportTargetTitles[] = {
    {ExportTarget::kHuggingFace, "Hugging Face"}, {ExportTarget::kDeepSpeed, "DeepSpeed"}};

// Precision regimes the stack runs: HF Trainer's bf16/fp16 flags are autocast (AMP);
// DeepSpeed's are 16-bit weights with fp32 master weights (mixed).
std::vector<Precision> ExportPrecisions(ExportTarget target);
// The wanted precisions the stack can run; when it runs none of them, its 16-bit regime
// for this GPU (bf16 where supported, else fp16).
std::vector<Precision> ExportablePrecisions(ExportTarget target,
                                            const std::vector<Precision>& wanted,
                                            bool bf16_supported);

nlohmann::json HfTrainingArguments(const TrainingConfig& config, bool checkpoint_all);
nlohmann::json DeepSpeedConfig(const TrainingConfig& config, int64_t global_batch);

}  // namespace headroom
