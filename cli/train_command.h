// `headroom train`: plan, then train on the local device with that plan and report the
// measured peak memory against the prediction. Built only with HEADROOM_WITH_TORCH.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/plan_flags.h"

namespace headroom {

struct TrainFlags {
  PlanFlags plan;
  std::string plan_file;  // --plan plan.yaml: execute a saved plan instead of the flags
  int64_t steps = 10;
  int64_t seed = 0;
  double learning_rate = 1e-3;
  std::string weights;       // HF safetensors file, index or directory
  std::string data;          // token file or text; empty: synthetic
  std::string data_format;   // u16 | u32 | text; empty: by extension
  std::string memory_limit;  // enforce a budget on the device allocator
  std::string save;          // directory for the final weights / PEFT adapter
  int64_t save_every = 0;
  std::optional<std::string> state;  // --state; unset: kDefaultStatePath
  std::string resume;
  std::string report;    // --report run.json
  std::string plan_out;  // --plan-out: where train --auto writes the plan it solved

  // The plan file train --auto writes: --plan-out, else plan.yaml beside the report (or
  // in the working directory).
  std::string plan_out_path() const;

  static constexpr const char* kDefaultStatePath = "headroom-train.state";
  std::string state_path() const { return state.value_or(kDefaultStatePath); }
};

void AddTrainFlags(CLI::App& command, TrainFlags& flags);
int RunTrainCommand(const TrainFlags& flags);

}  // namespace headroom
