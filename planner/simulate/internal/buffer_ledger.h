// The step simulator's buffers: reference-counted allocations, each allocation and free
// recorded in the timeline as a memory event of the current phase.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "planner/simulate/memory_timeline.h"

namespace headroom {

class BufferLedger {
 public:
  // `batch_scale`: the micro-batch, which per-sample sizes (given at micro-batch 1) scale to.
  BufferLedger(Timeline& timeline, int64_t batch_scale)
      : timeline_(timeline), batch_scale_(batch_scale) {}

  void Reserve(size_t buffers) { buffers_.reserve(buffers); }
  void SetPhase(int32_t phase) { phase_ = phase; }

  int64_t Acquire(int64_t bytes, Category category, bool per_sample = false, int refs = 1) {
    if (per_sample) bytes *= batch_scale_;
    const int64_t id = static_cast<int64_t>(buffers_.size());
    buffers_.push_back(Buffer{bytes, refs, category, per_sample});
    live_bytes_ += bytes;
    timeline_.events.push_back({.buffer = id,
                                .bytes = bytes,
                                .phase = phase_,
                                .kind = MemoryEvent::Kind::kAlloc,
                                .category = category,
                                .per_sample = per_sample});
    return id;
  }
  void Retain(int64_t id) { buffers_[id].refs++; }
  void Release(int64_t id) {
    Buffer& b = buffers_[id];
    if (b.refs <= 0) throw std::logic_error("simulator: release of a dead buffer");
    if (--b.refs > 0) return;
    timeline_.events.push_back({.buffer = id,
                                .bytes = b.bytes,
                                .phase = phase_,
                                .kind = MemoryEvent::Kind::kFree,
                                .category = b.category,
                                .per_sample = b.per_sample});
    live_bytes_ -= b.bytes;
    if (b.watched) freed_watched_.push_back(id);
  }

  // ---- for RepeatedOps (internal/repetition_replay.h) ----
  // The id the next buffer acquired will have, and where its event will go.
  int64_t next_buffer() const { return static_cast<int64_t>(buffers_.size()); }
  size_t next_event() const { return timeline_.events.size(); }
  // A buffer the size and kind of `of`, allocated at the place of event `at` (an index
  // in the timeline, before events appended since) in `phase`: the allocation is
  // inserted there by FinishInsertions.
  int64_t AcquireCopyAt(int64_t of, size_t at, int32_t phase) {
    const Buffer b = buffers_[of];
    const int64_t id = next_buffer();
    buffers_.push_back(Buffer{b.bytes, 1, b.category, b.per_sample});
    live_bytes_ += b.bytes;
    inserted_.push_back({at,
                         {.buffer = id,
                          .bytes = b.bytes,
                          .phase = phase,
                          .kind = MemoryEvent::Kind::kAlloc,
                          .category = b.category,
                          .per_sample = b.per_sample}});
    return id;
  }
  // Buffers whose last release is reported in freed_watched().
  void Watch(int64_t id) { buffers_[id].watched = true; }
  std::vector<int64_t>& freed_watched() { return freed_watched_; }
  // Merges the allocations AcquireCopyAt placed earlier into the timeline.
  void FinishInsertions() {
    if (inserted_.empty()) return;
    std::vector<MemoryEvent> merged;
    merged.reserve(timeline_.events.size() + inserted_.size());
    size_t next = 0;
    for (size_t i = 0; i <= timeline_.events.size(); ++i) {
      for (; next < inserted_.size() && inserted_[next].first == i; ++next)
        merged.push_back(inserted_[next].second);
      if (i < timeline_.events.size()) merged.push_back(timeline_.events[i]);
    }
    if (next != inserted_.size()) throw std::logic_error("simulator: insertions out of order");
    timeline_.events = std::move(merged);
    inserted_.clear();
  }

  // What lives across steps (weights, states, buckets): the only bytes live once a step
  // has ended, which CheckOnlyPersistentLive asserts.
  int64_t AcquirePersistent(int64_t bytes, Category category) {
    persistent_bytes_ += bytes;
    return Acquire(bytes, category);
  }
  void ReleasePersistent(int64_t id) {
    persistent_bytes_ -= buffers_[id].bytes;
    Release(id);
  }
  void CheckOnlyPersistentLive(int step) const {
    if (live_bytes_ != persistent_bytes_) {
      throw std::logic_error(
          fmt::format("simulator: {} bytes live after step {}, expected the {} persistent bytes",
                      live_bytes_, step, persistent_bytes_));
    }
  }

  int refs(int64_t id) const { return buffers_[id].refs; }

 private:
  struct Buffer {  // 16 bytes: one per allocation of a replay
    int64_t bytes;
    int32_t refs;
    Category category;
    bool per_sample;
    bool watched = false;
  };
  static_assert(sizeof(Buffer) == 16);

  Timeline& timeline_;
  const int64_t batch_scale_;
  int32_t phase_ = 0;
  int64_t live_bytes_ = 0;
  int64_t persistent_bytes_ = 0;
  std::vector<Buffer> buffers_;  // indexed by buffer id; refs == 0 once freed
  std::vector<int64_t> freed_watched_;
  // (event index, allocation), in the order of their indices.
  std::vector<std::pair<size_t, MemoryEvent>> inserted_;
};

}  // namespace headroom
