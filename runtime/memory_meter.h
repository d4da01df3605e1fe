// What the trainer measures: the peak of allocated tensor bytes (and, on CUDA, of the
// caching allocator's reserved bytes), with an optional budget that makes the device
// run out of memory early. One implementation per device kind.
#pragma once

#include <cstdint>
#include <memory>

#include <c10/core/Device.h>

#include "planner/core/byte_stat.h"

namespace headroom {

class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;
  virtual ByteStat allocated() const = 0;  // tensor bytes, current and peak
  virtual ByteStat reserved() const = 0;   // the allocator's segments; CPU: as allocated
  virtual void ResetPeak() = 0;
  // 0: the device's own limit. Past it, allocations throw c10::OutOfMemoryError.
  virtual void set_budget_bytes(int64_t bytes) = 0;
  // The memory the run may use: the budget when set, else the device's capacity.
  virtual int64_t available_bytes() const = 0;
};

// CPU: a counting allocator installed as LibTorch's CPU allocator. CUDA: the caching
// allocator's statistics, budget via its per-process memory fraction.
std::unique_ptr<MemoryMeter> MakeMemoryMeter(c10::Device device);

// Defined in cuda_memory_meter.cc; throws on builds or machines without CUDA.
std::unique_ptr<MemoryMeter> MakeCudaMemoryMeter(c10::DeviceIndex index);

}  // namespace headroom
