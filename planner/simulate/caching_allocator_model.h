// Consumer of the timeline that models PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp) to predict `reserved` memory:
//  - requests round up to 512 B;
//  - requests <= 1 MiB come from the small pool, carved from 2 MiB segments;
//  - larger requests: 1-10 MiB get a 20 MiB segment, >= 10 MiB round up to 2 MiB;
//  - best-fit free block (smallest size, then lowest address) within the pool;
//  - a block is split when the remainder is >= 512 B (small pool) or > 1 MiB (large);
//  - freed blocks coalesce with free neighbours and stay reserved;
//  - when a new segment would exceed the capacity, fully free segments are released
//    and the allocation retried (what PyTorch does before raising OOM).
#pragma once

#include "planner/simulate/layer.h"

#include <cstdint>
#include <vector>

#include "planner/core/byte_stat.h"
#include "planner/core/gpu_catalog.h"
#include "planner/simulate/free_block_index.h"
#include "planner/simulate/memory_timeline.h"

namespace headroom {

struct CachingAllocatorOptions {
  int64_t capacity_bytes = 0;  // memory the allocator may reserve; 0 means unlimited
};

class CachingAllocatorModel final : public EventConsumer {
 public:
  static constexpr int64_t kMinBlockSize = DeviceSpec::kCudaAllocationGranularity;
  static constexpr int64_t kSmallSize = 1 << 20;       // 1 MiB
  static constexpr int64_t kSmallBuffer = 2 << 20;     // 2 MiB
  static constexpr int64_t kLargeBuffer = 20 << 20;    // 20 MiB
  static constexpr int64_t kMinLargeAlloc = 10 << 20;  // 10 MiB
  static constexpr int64_t kRoundLarge = 2 << 20;      // 2 MiB

  explicit CachingAllocatorModel(CachingAllocatorOptions options = {}) : options_(options) {}

  void Alloc(const MemoryEvent& event) override;
  void Free(const MemoryEvent& event) override;
  // When a free block fits, the pair leaves the pools as they were (the block is split
  // and merged back): only the allocated peak moves.
  void AllocFree(const MemoryEvent& alloc, const MemoryEvent& free) override;

  static int64_t RoundSize(int64_t bytes);
  static int64_t SegmentSize(int64_t rounded);
  // Whether a block is split, the remainder kept as a free block.
  static bool KeepsRemainder(bool small_pool, int64_t remaining) {
    return small_pool ? remaining >= kMinBlockSize : remaining > kSmallSize;
  }

  const ByteStat& reserved() const { return reserved_; }    // segments
  const ByteStat& allocated() const { return allocated_; }  // rounded block sizes
  bool out_of_memory() const { return oom_phase_ >= 0; }
  int32_t oom_phase() const { return oom_phase_; }  // first event that could not fit
  int num_segments() const;

 private:
  struct Block {
    int segment;
    int64_t offset;
    int64_t size;
    bool allocated;
    int prev;  // neighbouring blocks in the same segment, -1 if none
    int next;
  };
  struct Segment {
    int64_t size;
    bool small;
    bool alive;
    int64_t address;  // monotonically increasing, for best-fit tie breaks
  };
  FreeBlockIndex& pool(bool small) { return small ? small_free_ : large_free_; }
  int64_t AddressOf(int block) const {
    return segments_[blocks_[block].segment].address + blocks_[block].offset;
  }
  int NewSegment(int64_t size, bool small);
  // Stores `block` in the slot of one merged away, if any: a replay splits and merges
  // blocks tens of thousands of times, and a small table stays in cache.
  int AddBlock(const Block& block);
  void ReleaseFreeSegments();

  CachingAllocatorOptions options_;
  std::vector<Block> blocks_;
  std::vector<int> dead_blocks_;  // slots of blocks merged into a neighbour
  std::vector<Segment> segments_;
  FreeBlockIndex small_free_, large_free_;
  std::vector<int> block_of_buffer_;  // by buffer id (ids are dense); -1 when not allocated
  int64_t next_address_ = 0;
  ByteStat reserved_;
  ByteStat allocated_;
  int32_t oom_phase_ = -1;
};

}  // namespace headroom
