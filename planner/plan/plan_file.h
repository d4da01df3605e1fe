// The plan file (`headroom plan -o plan.yaml`): versioned and self-describing — the
// inputs (model spec, device, training config), the decisions (micro-batch,
// accumulation, checkpointed blocks, precision), the predicted peaks and breakdown and
// the time estimate. It round-trips exactly and is what `headroom train` executes.
#pragma once

#include "planner/plan/layer.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "models/model_spec.h"
#include "planner/plan/plan_request.h"
#include "planner/core/result.h"
#include "planner/core/training_config.h"

namespace headroom {

inline constexpr int kPlanFormatVersion = 1;

struct PlanFile {
  ModelSpec model;
  std::string device;  // catalog GPU name, "custom" or "cpu"
  int64_t device_memory_bytes = 0;
  TrainingConfig config;  // micro_batch, grad_accum_steps, precision and checkpoint decided
  int64_t global_batch = 0;
  double margin = 0;
  // Predictions for the plan.
  bool fits = false;
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t device_bytes = 0;
  std::string peak_phase;
  std::map<std::string, int64_t> breakdown_bytes;  // by category name
  double step_seconds = 0;
  double tokens_per_second = 0;

  bool operator==(const PlanFile&) const = default;
};

std::string WritePlanYaml(const PlanFile& plan);
// Errors: malformed YAML, a missing or mistyped field, a newer format version.
Result<PlanFile> ParsePlanYaml(std::string_view text, std::string_view origin);

// The request a plan file at `path` describes: its model, config and device (a catalog
// GPU by name, else a custom GPU or the CPU of the recorded memory).
Result<PlanRequest> ReadPlanRequest(const std::string& path);

}  // namespace headroom
