// The training state (`train --resume state`): a safetensors file whose metadata says
// it is a state of this version. Any file either fails with an error or gives a step
// count within the bounds `train` accepts.
#include "fuzz/fuzz_input.h"
#include "planner/core/limits.h"
#include "runtime/formats/safetensors_header.h"
#include "runtime/formats/training_state_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const Result<SafetensorsHeader> header =
      ParseSafetensorsBytes(fuzz::AsText(data, size), "fuzz.state");
  if (!header) return 0;
  const Result<TrainingStateInfo> info = ReadTrainingStateInfo(header->metadata, "fuzz.state");
  if (info) fuzz::Require(info->steps >= 0 && info->steps <= limits::kMaxSteps, "steps bounded");
  return 0;
}
