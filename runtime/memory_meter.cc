#include "runtime/memory_meter.h"

#include "runtime/counting_cpu_allocator.h"

namespace headroom {

std::unique_ptr<MemoryMeter> MakeMemoryMeter(c10::Device device) {
  if (device.is_cuda()) return MakeCudaMemoryMeter(device.has_index() ? device.index() : 0);
  return std::make_unique<CpuMemoryMeter>();
}

}  // namespace headroom
