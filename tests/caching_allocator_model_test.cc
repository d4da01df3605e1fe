// The caching-allocator model against hand-worked sequences of the rules in
// c10/cuda/CUDACachingAllocator.cpp.
#include <gtest/gtest.h>

#include "planner/caching_allocator_model.h"

namespace headroom {
namespace {

constexpr int64_t kMiB = 1 << 20;

class AllocatorSequence {
 public:
  explicit AllocatorSequence(int64_t capacity = 0) : model_({.capacity_bytes = capacity}) {}
  int64_t Alloc(int64_t bytes) {
    model_.Alloc({.buffer = next_, .bytes = bytes, .phase = static_cast<int32_t>(next_),
                  .kind = MemoryEvent::Kind::kAlloc});
    return next_++;
  }
  void Free(int64_t id) {
    model_.Free({.buffer = id, .kind = MemoryEvent::Kind::kFree});
  }
  const CachingAllocatorModel& model() const { return model_; }

 private:
  CachingAllocatorModel model_;
  int64_t next_ = 0;
};

TEST(CachingAllocatorModel, RoundingAndSegmentSizes) {
  EXPECT_EQ(CachingAllocatorModel::RoundSize(1), 512);
  EXPECT_EQ(CachingAllocatorModel::RoundSize(513), 1024);
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(512), 2 * kMiB);
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(11 * kMiB), 12 * kMiB);
}

TEST(CachingAllocatorModel, BestFitSplitsAndNewSegments) {
  AllocatorSequence s;
  s.Alloc(100);  // small pool: 2 MiB segment, 512 B block
  EXPECT_EQ(s.model().reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(s.model().allocated_bytes(), 512);
  const int64_t b = s.Alloc(3 * kMiB);  // 1-10 MiB: 20 MiB segment, 17 MiB remainder
  EXPECT_EQ(s.model().reserved_bytes(), 22 * kMiB);
  s.Alloc(12 * kMiB + 1);  // 12 MiB + 512 carved from the 17 MiB remainder
  EXPECT_EQ(s.model().reserved_bytes(), 22 * kMiB);
  s.Free(b);  // 3 MiB free block, next to an allocated one
  // 4 MiB: the 3 MiB block is too small; best fit is the (5 MiB - 512) remainder, whose
  // leftover (1 MiB - 512) is not worth splitting in the large pool.
  s.Alloc(4 * kMiB);
  EXPECT_EQ(s.model().allocated_bytes(), 512 + (12 * kMiB + 512) + (5 * kMiB - 512));
  EXPECT_EQ(s.model().reserved_bytes(), 22 * kMiB);
  s.Alloc(30 * kMiB);  // nothing fits: a 30 MiB segment
  EXPECT_EQ(s.model().reserved_bytes(), 52 * kMiB);
  EXPECT_EQ(s.model().peak_reserved_bytes(), 52 * kMiB);
  EXPECT_EQ(s.model().num_segments(), 3);
  EXPECT_FALSE(s.model().out_of_memory());
}

TEST(CachingAllocatorModel, FreedNeighboursCoalesce) {
  AllocatorSequence s;
  const int64_t a = s.Alloc(1000), b = s.Alloc(1000);
  s.Alloc(1000);
  s.Free(b);
  s.Free(a);      // a and b merge into one 2048 B block at offset 0
  s.Alloc(2000);  // rounds to 2048: reuses the merged block exactly
  EXPECT_EQ(s.model().num_segments(), 1);
  EXPECT_EQ(s.model().reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(s.model().allocated_bytes(), 2048 + 1024);
}

TEST(CachingAllocatorModel, ReleasesCachedSegmentsBeforeRunningOut) {
  AllocatorSequence s(30 * kMiB);
  s.Free(s.Alloc(20 * kMiB));  // 20 MiB segment, now fully free but still reserved
  EXPECT_EQ(s.model().reserved_bytes(), 20 * kMiB);
  s.Alloc(24 * kMiB);  // 20 + 24 > 30: the free segment is released first
  EXPECT_EQ(s.model().reserved_bytes(), 24 * kMiB);
  EXPECT_FALSE(s.model().out_of_memory());
  s.Alloc(8 * kMiB);  // needs a 20 MiB segment: 44 MiB > 30 MiB
  EXPECT_TRUE(s.model().out_of_memory());
  EXPECT_EQ(s.model().oom_phase(), 2);
}

}  // namespace
}  // namespace headroom
