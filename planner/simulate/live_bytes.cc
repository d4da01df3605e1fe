#include "planner/simulate/live_bytes.h"

#include <algorithm>

namespace headroom {

void LiveBytes::Alloc(const MemoryEvent& event) {
  const int64_t bytes = Rounded(event.bytes);
  by_category_[static_cast<int>(event.category)] += bytes;
  const bool new_peak = live_.Increase(bytes);
  const size_t step = static_cast<size_t>(timeline_.phases[event.phase].step);
  if (step >= peak_by_step_.size()) peak_by_step_.resize(step + 1, 0);
  peak_by_step_[step] = std::max(peak_by_step_[step], live_.current);
  if (new_peak) {
    peak_phase_ = event.phase;
    peak_breakdown_ = by_category_;
  }
}

void LiveBytes::Free(const MemoryEvent& event) {
  const int64_t bytes = Rounded(event.bytes);
  live_.Decrease(bytes);
  by_category_[static_cast<int>(event.category)] -= bytes;
}

}  // namespace headroom
