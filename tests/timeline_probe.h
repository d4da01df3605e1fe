// Test helper: the live bytes by category just before the first backward event, i.e.
// what the forward passes keep for backward (plus what is persistent).
#pragma once

#include "planner/simulate/live_bytes.h"
#include "planner/simulate/memory_timeline.h"

namespace headroom {

inline CategoryBytes BreakdownAtBackwardStart(const Timeline& t) {
  LiveBytes live(t);
  for (const MemoryEvent& e : t.events) {
    if (t.phases[e.phase].kind == Phase::Kind::kBackward) break;
    ReplayEvent(e, live);
  }
  return live.current_breakdown();
}

}  // namespace headroom
