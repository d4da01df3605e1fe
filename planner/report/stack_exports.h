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

enum class ExportTarget { kHuggingFace, kDeepSpeed, kAccelerateFsdp, kTorchrun };
inline constexpr EnumName<ExportTarget> kExportTargetNames[] = {
    {ExportTarget::kHuggingFace, "hf"},
    {ExportTarget::kDeepSpeed, "deepspeed"},
    {ExportTarget::kAccelerateFsdp, "accelerate-fsdp"},
    {ExportTarget::kTorchrun, "torchrun"}};
inline constexpr EnumName<ExportTarget> kExportTargetTitles[] = {
    {ExportTarget::kHuggingFace, "Hugging Face"},
    {ExportTarget::kDeepSpeed, "DeepSpeed"},
    {ExportTarget::kAccelerateFsdp, "accelerate (FSDP2)"},
    {ExportTarget::kTorchrun, "torchrun"}};

// Precision regimes the stack runs: HF Trainer's bf16/fp16 flags are autocast (AMP);
// DeepSpeed's are 16-bit weights with fp32 master weights (mixed).
std::vector<Precision> ExportPrecisions(ExportTarget target);
// The wanted precisions the stack can run; when it runs none of them, its 16-bit regime
// for this GPU (bf16 where supported, else fp16).
std::vector<Precision> ExportablePrecisions(ExportTarget target,
                                            const std::vector<Precision>& wanted,
                                            bool bf16_supported);

// Whether HF Trainer runs `sharding` through DeepSpeed (ZeRO stages 1-3), whose bf16/fp16
// sections keep 16-bit parameters with fp32 master weights rather than autocast.
bool HfRunsDeepSpeed(Sharding sharding);
// TrainingArguments; with --sharding, `fsdp`/`fsdp_config` (FSDP2) or `deepspeed`
// (zero1: ZeRO stage 1) set as transformers reads them.
nlohmann::json HfTrainingArguments(const TrainingConfig& config, bool checkpoint_all,
                                   int64_t global_batch = 0);
// A DeepSpeed config: batch sizes, precision, and zero_optimization with the stage of
// the plan's sharding (ddp 0, zero1 1, fsdp-no-reshard 2, fsdp 3) and DeepSpeed's
// bucket defaults written out (runtime/zero/config.py, in elements), so that the file
// states what runs.
nlohmann::json DeepSpeedConfig(const TrainingConfig& config, int64_t global_batch);
int DeepSpeedStage(Sharding sharding);
// An accelerate config file (YAML) for FSDP2: processes, machines, reshard, activation
// checkpointing, mixed precision; the units are the model's _no_split_modules (its
// decoder layers), as accelerate's TRANSFORMER_BASED_WRAP picks by default.
std::string AccelerateFsdpConfig(const TrainingConfig& config, bool checkpoint_all);
// The torchrun command that starts the plan's ranks (`script` runs on each).
std::string TorchrunCommand(const Parallelism& parallel, const std::string& script);

}  // namespace headroom
