// The caching-allocator model against hand-worked sequences of the rules in
// c10/cuda/CUDACachingAllocator.cpp.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "planner/simulate/caching_allocator_model.h"

namespace headroom {
namespace {

constexpr int64_t kMiB = 1 << 20;

class AllocatorSequence {
 public:
  explicit AllocatorSequence(int64_t capacity = 0) : model_({.capacity_bytes = capacity}) {}
  int64_t Alloc(int64_t bytes) {
    model_.Alloc({.buffer = next_,
                  .bytes = bytes,
                  .phase = static_cast<int32_t>(next_),
                  .kind = MemoryEvent::Kind::kAlloc});
    return next_++;
  }
  void Free(int64_t id) { model_.Free({.buffer = id, .kind = MemoryEvent::Kind::kFree}); }
  // An allocation freed by the next event.
  void AllocFree(int64_t bytes) {
    model_.AllocFree({.buffer = next_, .bytes = bytes, .kind = MemoryEvent::Kind::kAlloc},
                     {.buffer = next_, .bytes = bytes, .kind = MemoryEvent::Kind::kFree});
    ++next_;
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
  EXPECT_EQ(s.model().reserved().current, 2 * kMiB);
  EXPECT_EQ(s.model().allocated().current, 512);
  const int64_t b = s.Alloc(3 * kMiB);  // 1-10 MiB: 20 MiB segment, 17 MiB remainder
  EXPECT_EQ(s.model().reserved().current, 22 * kMiB);
  s.Alloc(12 * kMiB + 1);  // 12 MiB + 512 carved from the 17 MiB remainder
  EXPECT_EQ(s.model().reserved().current, 22 * kMiB);
  s.Free(b);  // 3 MiB free block, next to an allocated one
  // 4 MiB: the 3 MiB block is too small; best fit is the (5 MiB - 512) remainder, whose
  // leftover (1 MiB - 512) is not worth splitting in the large pool.
  s.Alloc(4 * kMiB);
  EXPECT_EQ(s.model().allocated().current, 512 + (12 * kMiB + 512) + (5 * kMiB - 512));
  EXPECT_EQ(s.model().reserved().current, 22 * kMiB);
  s.Alloc(30 * kMiB);  // nothing fits: a 30 MiB segment
  EXPECT_EQ(s.model().reserved().current, 52 * kMiB);
  EXPECT_EQ(s.model().reserved().peak, 52 * kMiB);
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
  EXPECT_EQ(s.model().reserved().current, 2 * kMiB);
  EXPECT_EQ(s.model().allocated().current, 2048 + 1024);
}

TEST(CachingAllocatorModel, ReleasesCachedSegmentsBeforeRunningOut) {
  AllocatorSequence s(30 * kMiB);
  s.Free(s.Alloc(20 * kMiB));  // 20 MiB segment, now fully free but still reserved
  EXPECT_EQ(s.model().reserved().current, 20 * kMiB);
  s.Alloc(24 * kMiB);  // 20 + 24 > 30: the free segment is released first
  EXPECT_EQ(s.model().reserved().current, 24 * kMiB);
  EXPECT_FALSE(s.model().out_of_memory());
  s.Alloc(8 * kMiB);  // needs a 20 MiB segment: 44 MiB > 30 MiB
  EXPECT_TRUE(s.model().out_of_memory());
  EXPECT_EQ(s.model().oom_phase(), 2);
}

TEST(CachingAllocatorModel, AllocFreeCountsTheWholeBlockWhenTheRemainderIsNotSplit) {
  AllocatorSequence s;
  s.Free(s.Alloc(12 * kMiB));     // a 12 MiB segment, free
  s.Free(s.Alloc(14 * kMiB));     // a 14 MiB segment (12 does not fit), free
  s.Alloc(11 * kMiB + kMiB / 2);  // takes the 12 MiB block whole: 0.5 MiB is not split off
  EXPECT_EQ(s.model().allocated().current, 12 * kMiB);
  // 13.6 MiB takes the 14 MiB block whole too: 12 + 14 MiB were allocated at once.
  s.AllocFree(13 * kMiB + 600 * 1024);
  EXPECT_EQ(s.model().allocated().peak, 26 * kMiB);
  EXPECT_EQ(s.model().allocated().current, 12 * kMiB);
  EXPECT_EQ(s.model().reserved().peak, 26 * kMiB);
  // A pair that needs a new segment takes the full path.
  s.AllocFree(30 * kMiB);
  EXPECT_EQ(s.model().reserved().peak, 56 * kMiB);
  EXPECT_EQ(s.model().allocated().peak, 42 * kMiB);
}

// ReplayInto hands an allocation freed by the next event to AllocFree, which skips the
// split and merge when a free block fits. On random streams with many such pairs it
// must leave every later decision as the one-event-at-a-time replay makes it.
TEST(CachingAllocatorModel, AllocFreePairsReplayLikeSeparateEvents) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<MemoryEvent> events;
    std::vector<int64_t> live;
    int64_t next = 0;
    for (int i = 0; i < 3000; ++i) {
      const int64_t sizes[] = {300, 4096, 700 * 1024, 3 * kMiB, 25 * kMiB, 64 * kMiB};
      const int64_t bytes = sizes[rng() % 6] + static_cast<int64_t>(rng() % 4096);
      const auto roll = rng() % 10;
      if (roll < 3) {  // an ephemeral buffer: allocated and freed at once
        events.push_back({.buffer = next, .bytes = bytes, .kind = MemoryEvent::Kind::kAlloc});
        events.push_back({.buffer = next++, .bytes = bytes, .kind = MemoryEvent::Kind::kFree});
      } else if (roll < 7 || live.empty()) {
        events.push_back({.buffer = next, .bytes = bytes, .kind = MemoryEvent::Kind::kAlloc});
        live.push_back(next++);
      } else {
        const size_t k = rng() % live.size();
        events.push_back({.buffer = live[k], .kind = MemoryEvent::Kind::kFree});
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    CachingAllocatorModel paired, separate;
    ReplayInto(events, 0, events.size(), paired);
    for (const MemoryEvent& e : events) ReplayEvent(e, separate);
    EXPECT_EQ(paired.allocated().peak, separate.allocated().peak) << "trial " << trial;
    EXPECT_EQ(paired.reserved().peak, separate.reserved().peak) << "trial " << trial;
    EXPECT_EQ(paired.allocated().current, separate.allocated().current) << "trial " << trial;
    EXPECT_EQ(paired.num_segments(), separate.num_segments()) << "trial " << trial;
  }
}

}  // namespace
}  // namespace headroom
