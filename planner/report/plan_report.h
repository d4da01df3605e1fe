// The outputs of `headroom plan` for one PlanOutcome: the text report (with the
// no-plan-fits header and what would fit), its JSON, and the export to another stack
// with the notes a user of that stack needs.
#pragma once

#include "planner/report/layer.h"

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/plan/plan_outcome.h"
#include "planner/report/stack_exports.h"

namespace headroom {

std::string FormatPlanText(const PlanRequest& request, const PlanOutcome& outcome);
nlohmann::json PlanJson(const PlanRequest& request, const PlanOutcome& outcome);

struct StackExport {
  std::string text;                // TrainingArguments or DeepSpeed JSON, accelerate YAML,
                                   // or the torchrun command
  std::vector<std::string> notes;  // for stderr: what the stack changes in the plan
};
StackExport ExportPlan(ExportTarget target, const PlanOutcome& outcome);

// Narrows the solver's precisions to those `target` runs; the note says what changed
// (empty when nothing did). For Hugging Face, the engine under the Trainer decides: a ZeRO
// `sharding` runs DeepSpeed's precisions, and a search without one tries DDP and FSDP2
// (through accelerate) only, whose precisions are the Trainer's own.
std::string NarrowToExportable(ExportTarget target, std::optional<Sharding> sharding,
                               Precision requested, bool bf16_supported, SearchOptions& options);

}  // namespace headroom
