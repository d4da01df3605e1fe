// `headroom capacity`: every GPU type x count for a training job, with the plan, speed
// and cost of each, and the answers (fewest, cheapest, fastest, Pareto front).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/plan_flags.h"

namespace headroom {

struct CapacityFlags {
  PlanFlags request;  // the training flags of plan; the GPU and count are swept
  std::optional<double> tokens;
  std::optional<double> dataset_tokens;
  double epochs = 1;
  std::vector<std::string> gpu_types;  // empty: the whole catalog
  std::optional<std::string> prices_path;
  bool owned = false;  // price GPUs by purchase, amortized, instead of cloud rental
  std::optional<double> max_hours;
  std::optional<double> max_cost;
  std::optional<std::string> csv_path;
  std::optional<std::string> html_path;
};

void AddCapacityFlags(CLI::App& command, CapacityFlags& flags);
// Returns the process exit code (2 for bad input).
int RunCapacityCommand(CapacityFlags flags);

}  // namespace headroom
