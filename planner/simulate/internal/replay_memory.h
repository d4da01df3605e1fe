// How an engine's replay (FSDP2, DeepSpeed ZeRO-2 and ZeRO-3) takes and gives back memory: through
// the step simulator's accounting, so its buffers show in the one timeline.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstddef>
#include <cstdint>
#include <functional>

#include "planner/simulate/memory_category.h"

namespace headroom {

struct ReplayMemory {
  std::function<int64_t(int64_t bytes, Category category)> acquire;
  std::function<void(int64_t buffer)> release;
  // Held across steps (the simulator checks them after each step) until given back with
  // release_persistent, if ever.
  std::function<int64_t(int64_t bytes, Category category)> acquire_persistent;
  std::function<void(int64_t buffer)> release_persistent;
  // Frees the .grad of parameter i (FSDP2 takes it off after packing it).
  std::function<void(size_t param)> drop_grad;
};

}  // namespace headroom
