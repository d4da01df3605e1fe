// `headroom train`: plan, then train on the local device with that plan and report the
// measured peak memory against the prediction. Built only with HEADROOM_WITH_TORCH.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/plan_flags.h"

namespace headroom {

struct TrainFlags {
  PlanFlags plan;
  int64_t steps = 10;
  uint64_t seed = 0;
  double learning_rate = 1e-3;
  std::string report;  // --report run.json
};

void AddTrainFlags(CLI::App& command, TrainFlags& flags);
int RunTrainCommand(const TrainFlags& flags);

}  // namespace headroom
