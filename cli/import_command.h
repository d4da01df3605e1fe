// `headroom import`: records a model's graph from its own transformers code for one
// training regime and writes the graph file (docs/graph-file.md) that `--model` plans.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/plan_flags.h"

namespace headroom {

struct ImportFlags {
  PlanFlags request;  // the model (a config.json) and the regime: precision, LoRA, ...
  std::string out;
};

void AddImportFlags(CLI::App& command, ImportFlags& flags);
// Returns the process exit code (2 for bad input or an import that cannot be lifted).
int RunImportCommand(const ImportFlags& flags);

}  // namespace headroom
