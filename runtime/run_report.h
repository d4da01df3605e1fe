// The run report of `headroom train`: measured peak memory against the prediction, loss
// and throughput, accumulated step by step and written as JSON.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "runtime/op_kernels.h"
#include "runtime/trainer.h"

namespace headroom {

// The memory a run was planned against and where that number came from (train --auto).
struct RunBudget {
  int64_t bytes = 0;
  std::string source;
  std::string device_name;  // CUDA: the device's own name
};

struct RunReport {
  int64_t predicted_peak_allocated_bytes = 0;
  int64_t measured_peak_allocated_bytes = 0;
  int64_t predicted_peak_reserved_bytes = 0;  // CUDA only
  int64_t measured_peak_reserved_bytes = 0;   // CUDA only
  double error_pct = 0;                       // (measured - predicted) / predicted
  int64_t steps = 0;
  double loss_first = 0, loss_last = 0;
  double tokens_per_second = 0;
  int64_t skipped_steps = 0;
  int64_t oom_retries = 0;
  double seconds = 0, tokens = 0;             // summed over the steps recorded
  std::optional<MoeRouting> routing_assumed;  // mixtures of experts: the plan's assumption
  RoutingSeen routing_seen;
  Plan plan;                        // the plan the last step ran (after any re-plan)
  std::optional<RunBudget> budget;  // set by the caller when the plan was solved for one

  // Adds one optimizer step's results (taken under `config`, the plan of that step);
  // returns the step's tokens.
  double Record(const StepStats& step, const TrainingConfig& config);
  // Fills the peaks and the error from the trainer after its last step.
  void Finish(const Trainer& trainer);
};

// Writes the report as JSON (atomically); `cuda` adds the reserved peaks.
void WriteRunReport(const std::filesystem::path& path, const std::string& model, bool cuda,
                    const RunReport& report);

}  // namespace headroom
