// `headroom plan` and `headroom simulate`: predict a stated plan, or solve for one,
// then print the report / JSON / plan file / export the user asked for.
#pragma once

#include <string>

#include "cli/plan_flags.h"

namespace headroom {

struct TimelineOutputs {
  std::string csv_path;
  std::string svg_path;
};

// Returns the process exit code (2 for bad input).
int RunPlanCommand(const PlanFlags& flags, const TimelineOutputs* timeline);

}  // namespace headroom
