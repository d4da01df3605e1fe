#include "planner/live_bytes.h"

#include <algorithm>

namespace headroom {

void LiveBytes::Alloc(const MemoryEvent& event) {
  const int64_t bytes = Rounded(event.bytes);
  current_ += bytes;
  by_category_[static_cast<int>(event.category)] += bytes;
  int64_t& step_peak = peak_by_step_[timeline_.phases[event.phase].step];
  step_peak = std::max(step_peak, current_);
  if (current_ > peak_) {
    peak_ = current_;
    peak_phase_ = event.phase;
    peak_breakdown_ = by_category_;
  }
}

void LiveBytes::Free(const MemoryEvent& event) {
  const int64_t bytes = Rounded(event.bytes);
  current_ -= bytes;
  by_category_[static_cast<int>(event.category)] -= bytes;
}

}  // namespace headroom
