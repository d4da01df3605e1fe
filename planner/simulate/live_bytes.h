// Consumer of the timeline that tracks live tensor bytes: the `allocated` peak
// (torch.cuda.max_memory_allocated), the phase where it happens and the per-category
// breakdown at that instant, plus the peak of each step.
#pragma once

#include "planner/simulate/layer.h"

#include <vector>

#include "planner/core/byte_stat.h"
#include "planner/simulate/granularity.h"
#include "planner/simulate/memory_timeline.h"

namespace headroom {

class LiveBytes final : public EventConsumer {
 public:
  // `granularity`: sizes round up to a multiple of it (512 on CUDA, where the caching
  // allocator's statistics count rounded blocks; 1 on CPU).
  explicit LiveBytes(const Timeline& timeline, int64_t granularity = 1)
      : timeline_(timeline), granularity_(granularity) {}

  void Alloc(const MemoryEvent& event) override;
  void Free(const MemoryEvent& event) override;

  const ByteStat& live() const { return live_; }  // rounded to the granularity
  int32_t peak_phase() const { return peak_phase_; }
  const CategoryBytes& breakdown_at_peak() const { return peak_breakdown_; }
  const CategoryBytes& current_breakdown() const { return by_category_; }
  // Peak of live bytes during each step, indexed by step (0 = setup).
  const std::vector<int64_t>& peak_by_step() const { return peak_by_step_; }

 private:
  int64_t Rounded(int64_t bytes) const { return granularity_.RoundUp(bytes); }

  const Timeline& timeline_;
  Granularity granularity_;
  ByteStat live_;
  int32_t peak_phase_ = 0;
  CategoryBytes by_category_{};
  CategoryBytes peak_breakdown_{};
  std::vector<int64_t> peak_by_step_;
};

}  // namespace headroom
