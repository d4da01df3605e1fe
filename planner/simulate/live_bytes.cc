#include "planner/simulate/live_bytes.h"

#include <algorithm>

namespace headroom {

void LiveBytes::Alloc(const MemoryEvent& event) {
  const int64_t bytes = Rounded(event.bytes);
  current_ += bytes;
  by_category_[static_cast<int>(event.category)] += bytes;
  const size_t step = static_cast<size_t>(timeline_.phases[event.phase].step);
  if (step >= peak_by_step_.size()) peak_by_step_.resize(step + 1, 0);
  peak_by_step_[step] = std::max(peak_by_step_[step], current_);
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
