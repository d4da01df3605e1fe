// The memory a run may use on the device it runs on, read from the device itself, for
// `train --auto`: the plan is solved against it instead of the catalog's size of a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace headroom {

struct DeviceBudget {
  int64_t bytes = 0;   // what the run may allocate (before the solver's margin)
  std::string source;  // where the number came from, for the report
  // CUDA: the device's name (cudaDeviceProp::name) and total memory.
  std::string device_name;
  int64_t total_bytes = 0;
};

// CUDA: the free memory the driver reports now (cudaMemGetInfo, after the context is
// made), or `memory_limit` if lower. CPU: `memory_limit` when given, else the memory the kernel
// reports available (MemAvailable in /proc/meminfo). Throws when the device cannot be read.
DeviceBudget ReadDeviceBudget(bool cuda, std::optional<int64_t> memory_limit);

}  // namespace headroom
