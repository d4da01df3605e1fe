// The training state `train --save-every` writes and `--resume` reads: a safetensors file
// whose metadata says what it is (format, version, the run's fingerprint, the steps done)
// and whose tensors are the trainable parameters ("param/<name>"), fp32 master weights
// ("master/<i>"), optimizer state ("optim/<i>/<field>"), RNG states ("rng/cpu",
// "rng/device") and the loss scaler ("loss_scaler"). Reading its header needs no
// LibTorch, so the part that sees untrusted bytes is fuzzed with the safetensors header.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "planner/core/result.h"

namespace headroom {

inline constexpr std::string_view kTrainingStateFormat = "headroom-training-state";
inline constexpr int64_t kTrainingStateVersion = 2;

struct TrainingStateInfo {
  std::string fingerprint;  // model, plan and seed of the run that saved it
  int64_t steps = 0;
};

// The metadata a state is written with.
std::map<std::string, std::string> TrainingStateMetadata(const TrainingStateInfo& info);

// Checks that a safetensors file's metadata is a training state's, of this version, and
// returns what it records; the error names `where`.
Result<TrainingStateInfo> ReadTrainingStateInfo(const std::map<std::string, std::string>& metadata,
                                                std::string_view where);

}  // namespace headroom
