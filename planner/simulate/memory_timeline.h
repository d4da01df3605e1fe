// The memory timeline of a training step: an ordered stream of alloc/free events, each
// tagged with a category and the phase of the step it happened in. Consumers (live
// bytes, the CUDA caching allocator model) replay it; see XLA's heap simulator for the
// driver / strategy split.
#pragma once

#include "planner/simulate/layer.h"

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/simulate/memory_category.h"

namespace headroom {

struct Phase {
  enum class Kind { kSetup, kForward, kRecompute, kBackward, kOptimizerStep, kZeroGrad };
  Kind kind = Kind::kSetup;
  int step = 0;             // 1-based optimizer step; 0 for setup
  int64_t micro_batch = 0;  // 1-based within the step; 0 outside forward/backward
  OpId op;                  // the op running, when there is one
  int block = -1;
};

inline constexpr EnumName<Phase::Kind> kPhaseKindNames[] = {
    {Phase::Kind::kSetup, "setup"},
    {Phase::Kind::kForward, "forward"},
    {Phase::Kind::kRecompute, "recompute"},
    {Phase::Kind::kBackward, "backward"},
    {Phase::Kind::kOptimizerStep, "optimizer step"},
    {Phase::Kind::kZeroGrad, "zero_grad"}};
inline std::string_view PhaseKindName(Phase::Kind kind) { return NameIn(kPhaseKindNames, kind); }
// "step 2, backward, micro-batch 1/4, model.layers.31.mlp.down_proj"
std::string DescribePhase(const Phase& phase, const OpGraph& graph, int64_t micro_batches);

struct MemoryEvent {
  enum class Kind : uint8_t { kAlloc, kFree };
  // Fields ordered so an event packs into 24 bytes: a solve replays a few hundred
  // thousand of them.
  int64_t buffer = 0;  // unique per allocation
  int64_t bytes = 0;
  int32_t phase = 0;  // index into Timeline::phases
  Kind kind = Kind::kAlloc;
  Category category = Category::kActivations;
  // The size is proportional to the micro-batch (activations and their gradients). The
  // event sequence itself does not depend on the micro-batch, so one replay at
  // micro-batch 1 gives the live bytes at any micro-batch.
  bool per_sample = false;
};
static_assert(sizeof(MemoryEvent) == 24);

struct Timeline {
  std::vector<Phase> phases;
  std::vector<MemoryEvent> events;
};

// Something that replays a timeline (XLA's HeapAlgorithm): it sees every event in order.
class EventConsumer {
 public:
  virtual ~EventConsumer() = default;
  virtual void Alloc(const MemoryEvent& event) = 0;
  virtual void Free(const MemoryEvent& event) = 0;
  // An allocation freed by the very next event (a workspace, an ephemeral buffer): a
  // consumer may take the pair at once.
  virtual void AllocFree(const MemoryEvent& alloc, const MemoryEvent& free) {
    Alloc(alloc);
    Free(free);
  }
};

// Hands one event to the consumer's Alloc or Free.
void ReplayEvent(const MemoryEvent& event, EventConsumer& consumer);
// The whole timeline, through ReplayInto.
void Replay(const Timeline& timeline, EventConsumer& consumer);

// Replays events [begin, end) into several consumers in one pass. With consumers of
// final classes the calls are direct: the solver replays a hundred thousand events per
// plan it verifies.
template <typename... Consumers>
void ReplayInto(const std::vector<MemoryEvent>& events, size_t begin, size_t end,
                Consumers&... consumers) {
  for (size_t i = begin; i < end; ++i) {
    const MemoryEvent& e = events[i];
    if (e.kind == MemoryEvent::Kind::kAlloc) {
      if (i + 1 < end && events[i + 1].buffer == e.buffer) {
        (consumers.AllocFree(e, events[i + 1]), ...);
        ++i;
      } else {
        (consumers.Alloc(e), ...);
      }
    } else {
      (consumers.Free(e), ...);
    }
  }
}

}  // namespace headroom
