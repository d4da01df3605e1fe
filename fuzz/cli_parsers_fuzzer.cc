// The command line's size and range parsers: sizes (--gpu-mem, --memory-limit), integers
// and reals (every numeric flag) and checkpoint policies (--checkpoint). Whatever they
// accept must be within the bounds they promise.
#include <cmath>
#include <limits>

#include "fuzz/fuzz_input.h"
#include "planner/core/byte_units.h"
#include "planner/core/limits.h"
#include "planner/core/number_parse.h"
#include "planner/core/training_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string_view text = fuzz::AsText(data, size);
  if (Result<int64_t> bytes = ParseBytes(text))
    fuzz::Require(*bytes >= 1, "a size is at least one byte");
  if (Result<int64_t> n = ParseInteger(text, 1, limits::kMaxBatch, "--micro-batch"))
    fuzz::Require(*n >= 1 && *n <= limits::kMaxBatch, "an integer flag is within its range");
  if (Result<int64_t> n = ParseInteger(text, std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max(), "--seed"))
    fuzz::Require(FormatBytes(*n).size() > 0, "any int64 formats");
  if (Result<double> x = ParseReal(text, 0.0, 0.5, "--margin"))
    fuzz::Require(std::isfinite(*x) && *x >= 0.0 && *x <= 0.5, "a real flag is within range");
  if (Result<CheckpointPolicy> policy = CheckpointPolicy::Parse(text)) {
    for (int blocks : {1, 12, 4096}) {
      Result<std::vector<bool>> flags = policy->Resolve(blocks);
      if (flags) fuzz::Require(static_cast<int>(flags->size()) == blocks, "one flag per block");
    }
  }
  return 0;
}
