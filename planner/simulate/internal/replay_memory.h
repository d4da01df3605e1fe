// How an engine's replay (FSDP2, DeepSpeed ZeRO-2) takes and gives back memory: through
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
  // Held for the rest of the run (the simulator checks them after each step).
  std::function<void(int64_t bytes, Category category)> acquire_persistent;
  // Frees the .grad of parameter i (FSDP2 takes it off after packing it).
  std::function<void(size_t param)> drop_grad;
};

}  // namespace headroom
