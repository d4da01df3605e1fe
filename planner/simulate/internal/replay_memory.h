// How an engine's replay (FSDP2, DeepSpeed ZeRO-2 and ZeRO-3) takes and gives back memory: through
// the step simulator's accounting, so its buffers show in the one timeline.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstddef>
#include <cstdint>
#include <functional>

#include "planner/simulate/memory_category.h"
#include "planner/simulate/optimizer_model.h"

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

// A torch optimizer stepping over one flat fp32 tensor, as DeepSpeed hands it its
// partition: the states at the first step, then that one tensor's temporaries or the
// group's (foreach), whichever the implementation makes.
inline void StepOverFlatTensor(const ReplayMemory& memory, const OptimizerParamCost& cost,
                               int step) {
  if (step == 1) {
    for (int64_t bytes : cost.state_bytes) memory.acquire_persistent(bytes, Category::kOptimizer);
    if (cost.step_tensor_bytes > 0)
      memory.acquire_persistent(cost.step_tensor_bytes, Category::kOptimizer);
  }
  const int64_t temps =
      cost.step_temp_bytes > cost.group_temp_bytes ? cost.step_temp_bytes : cost.group_temp_bytes;
  if (temps > 0) memory.release(memory.acquire(temps, Category::kTemporaries));
}

}  // namespace headroom
