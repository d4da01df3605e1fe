// An allocator's size granularity: 512 B on CUDA (the caching allocator's rounding),
// 1 B on the CPU. Replays round every event, so the granularity must be a power of two
// and rounding is a mask, not a 64-bit division (which dominated the live-bytes count).
#pragma once

#include "planner/simulate/layer.h"

#include <bit>
#include <cstdint>
#include <stdexcept>

#include "planner/core/checked_math.h"

namespace headroom {

class Granularity {
 public:
  explicit Granularity(int64_t bytes) : mask_(bytes - 1) {
    if (bytes <= 0 || !std::has_single_bit(static_cast<uint64_t>(bytes)))
      throw std::invalid_argument("allocation granularity must be a power of two");
  }
  int64_t RoundUp(int64_t bytes) const {
    return CheckedAdd(bytes, mask_, "an allocation") & ~mask_;
  }

 private:
  int64_t mask_;
};

}  // namespace headroom
