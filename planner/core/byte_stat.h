// One counter of bytes with its high-water mark, as c10's allocator Stat keeps them: the
// one vocabulary for "current" and "peak" across the live-bytes counter and the
// allocator model (allocated and reserved).
#pragma once

#include <algorithm>
#include <cstdint>

#include "planner/core/checked_math.h"

namespace headroom {

struct ByteStat {
  int64_t current = 0;
  int64_t peak = 0;

  // Returns true when this raised the peak.
  bool Increase(int64_t bytes) {
    current = CheckedAdd(current, bytes, "the live bytes");
    if (current <= peak) return false;
    peak = current;
    return true;
  }
  void Decrease(int64_t bytes) { current -= bytes; }
  // A high-water mark reached between two counted states (an allocation and free
  // replayed as a pair).
  void NotePeak(int64_t bytes) { peak = std::max(peak, bytes); }
};

}  // namespace headroom
