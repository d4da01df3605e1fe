#include "planner/simulate/caching_allocator_model.h"

#include <algorithm>
#include <stdexcept>

namespace headroom {

int64_t CachingAllocatorModel::RoundSize(int64_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

int64_t CachingAllocatorModel::SegmentSize(int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

int CachingAllocatorModel::NewSegment(int64_t size, bool small) {
  segments_.push_back({size, small, true, next_address_});
  next_address_ = CheckedAdd(next_address_, size, "the reserved bytes");
  reserved_.Increase(size);
  return AddBlock({static_cast<int>(segments_.size() - 1), 0, size, false, -1, -1});
}

int CachingAllocatorModel::AddBlock(const Block& block) {
  if (dead_blocks_.empty()) {
    blocks_.push_back(block);
    return static_cast<int>(blocks_.size() - 1);
  }
  const int index = dead_blocks_.back();
  dead_blocks_.pop_back();
  blocks_[index] = block;
  return index;
}

void CachingAllocatorModel::ReleaseFreeSegments() {
  auto whole_free_segment = [this](int block) {
    const Block& b = blocks_[block];
    Segment& seg = segments_[b.segment];
    if (b.prev != -1 || b.next != -1 || b.size != seg.size) return false;
    seg.alive = false;
    reserved_.Decrease(seg.size);
    return true;
  };
  small_free_.EraseIf(whole_free_segment);
  large_free_.EraseIf(whole_free_segment);
}

void CachingAllocatorModel::Alloc(const MemoryEvent& event) {
  const int64_t size = RoundSize(event.bytes);
  const bool small = size <= kSmallSize;
  FreeBlockIndex& free_set = pool(small);
  int block = free_set.TakeBestFit(size);
  if (block < 0) {
    const int64_t segment_size = SegmentSize(size);
    if (options_.capacity_bytes > 0 && reserved_.current + segment_size > options_.capacity_bytes) {
      ReleaseFreeSegments();
      if (reserved_.current + segment_size > options_.capacity_bytes && oom_phase_ < 0)
        oom_phase_ = event.phase;
    }
    block = NewSegment(segment_size, small);
  }
  const int64_t remaining = blocks_[block].size - size;
  if (KeepsRemainder(small, remaining)) {
    Block rest{blocks_[block].segment, blocks_[block].offset + size, remaining, false, block,
               blocks_[block].next};
    const int rest_index = AddBlock(rest);
    if (rest.next != -1) blocks_[rest.next].prev = rest_index;
    blocks_[block].next = rest_index;
    blocks_[block].size = size;
    free_set.Insert(remaining, AddressOf(rest_index), rest_index);
  }
  blocks_[block].allocated = true;
  if (static_cast<size_t>(event.buffer) >= block_of_buffer_.size()) {
    block_of_buffer_.resize(std::max<size_t>(event.buffer + 1, 2 * block_of_buffer_.size()), -1);
  }
  block_of_buffer_[event.buffer] = block;
  allocated_.Increase(blocks_[block].size);
}

void CachingAllocatorModel::AllocFree(const MemoryEvent& alloc, const MemoryEvent& free) {
  const int64_t size = RoundSize(alloc.bytes);
  const bool small = size <= kSmallSize;
  const int64_t fit = pool(small).BestFitSize(size);
  if (fit < 0) {  // a new segment: the full path
    Alloc(alloc);
    Free(free);
    return;
  }
  allocated_.NotePeak(allocated_.current + (KeepsRemainder(small, fit - size) ? size : fit));
}

void CachingAllocatorModel::Free(const MemoryEvent& event) {
  if (static_cast<size_t>(event.buffer) >= block_of_buffer_.size() ||
      block_of_buffer_[event.buffer] < 0) {
    throw std::logic_error("allocator model: free of an unknown buffer");
  }
  int block = block_of_buffer_[event.buffer];
  block_of_buffer_[event.buffer] = -1;
  allocated_.Decrease(blocks_[block].size);
  blocks_[block].allocated = false;
  auto& free_set = pool(segments_[blocks_[block].segment].small);
  // Coalesce with free neighbours.
  for (int neighbour : {blocks_[block].prev, blocks_[block].next}) {
    if (neighbour == -1 || blocks_[neighbour].allocated) continue;
    free_set.Erase(blocks_[neighbour].size, AddressOf(neighbour));
    Block& b = blocks_[block];
    Block& n = blocks_[neighbour];
    if (neighbour == b.prev) {
      b.offset = n.offset;
      b.prev = n.prev;
      if (n.prev != -1) blocks_[n.prev].next = block;
    } else {
      b.next = n.next;
      if (n.next != -1) blocks_[n.next].prev = block;
    }
    b.size += n.size;
    n.size = 0;
    dead_blocks_.push_back(neighbour);
  }
  free_set.Insert(blocks_[block].size, AddressOf(block), block);
}

int CachingAllocatorModel::num_segments() const {
  return static_cast<int>(
      std::count_if(segments_.begin(), segments_.end(), [](const Segment& s) { return s.alive; }));
}

}  // namespace headroom
