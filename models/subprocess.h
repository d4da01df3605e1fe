// Runs a program without a shell (argv as given, nothing to escape) and reads its output.
#pragma once

#include "models/layer.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/result.h"

namespace headroom {

struct ProcessResult {
  int exit_code = -1;           // -1: killed by a signal
  std::string out;              // stdout
  std::string last_error_line;  // stderr's last non-empty line
};

// `on_error_line` sees each line of stderr as it comes (progress); may be empty. Error only
// when the program cannot be started.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const std::function<void(std::string_view)>& on_error_line = {});

}  // namespace headroom
