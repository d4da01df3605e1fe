#include "planner/simulate/memory_timeline.h"

#include <fmt/format.h>

namespace headroom {

std::string DescribePhase(const Phase& phase, const OpGraph& graph, int64_t micro_batches) {
  std::string out = phase.kind == Phase::Kind::kSetup
                        ? "setup"
                        : fmt::format("step {}, {}", phase.step, PhaseKindName(phase.kind));
  if (phase.micro_batch > 0)
    out += fmt::format(", micro-batch {}/{}", phase.micro_batch, micro_batches);
  if (phase.op.valid()) out += ", " + graph.op(phase.op).name;
  return out;
}

void ReplayEvent(const MemoryEvent& event, EventConsumer& consumer) {
  if (event.kind == MemoryEvent::Kind::kAlloc) {
    consumer.Alloc(event);
  } else {
    consumer.Free(event);
  }
}

void Replay(const Timeline& timeline, EventConsumer& consumer) {
  ReplayInto(timeline.events, 0, timeline.events.size(), consumer);
}

}  // namespace headroom
