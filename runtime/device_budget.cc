#include "runtime/device_budget.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#if __has_include(<c10/cuda/CUDAFunctions.h>)
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#define HEADROOM_HAS_CUDA_HEADERS 1
#endif

namespace headroom {
namespace {

// MemAvailable: the kernel's estimate of what can be allocated without swapping.
int64_t MemAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  throw std::runtime_error("cannot read MemAvailable from /proc/meminfo; give --memory-limit");
}

DeviceBudget ReadCudaBudget() {
#ifdef HEADROOM_HAS_CUDA_HEADERS
  if (c10::cuda::device_count() == 0) throw std::runtime_error("no CUDA device on this machine");
  const int index = c10::cuda::current_device();
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
    throw std::runtime_error("cudaMemGetInfo failed on device " + std::to_string(index));
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, index) != cudaSuccess)
    throw std::runtime_error("cudaGetDeviceProperties failed on device " + std::to_string(index));
  return {.bytes = static_cast<int64_t>(free_bytes),
          .source =
              "free memory the driver reports (cudaMemGetInfo) on device " + std::to_string(index),
          .device_name = properties.name,
          .total_bytes = static_cast<int64_t>(total_bytes)};
#else
  throw std::runtime_error("this build's LibTorch has no CUDA support");
#endif
}

}  // namespace

DeviceBudget ReadDeviceBudget(bool cuda, std::optional<int64_t> memory_limit) {
  if (cuda) {
    DeviceBudget budget = ReadCudaBudget();
    if (memory_limit && *memory_limit < budget.bytes) {
      budget.bytes = *memory_limit;
      budget.source = "--memory-limit (under the driver's free memory)";
    }
    return budget;
  }
  if (memory_limit) return {.bytes = *memory_limit, .source = "--memory-limit"};
  return {.bytes = MemAvailableBytes(), .source = "available host memory (MemAvailable)"};
}

}  // namespace headroom
