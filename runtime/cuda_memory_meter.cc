// The CUDA memory meter: the caching allocator's own statistics (allocated and reserved,
// current and peak), and a budget through its per-process memory fraction, which makes
// the allocator raise c10::OutOfMemoryError exactly as a full device does. Compiled
// wherever LibTorch ships its CUDA headers; runs only on a machine with a GPU.
#include <stdexcept>

#include "runtime/memory_meter.h"

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

namespace headroom {
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;
constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

class CudaMemoryMeter final : public MemoryMeter {
 public:
  explicit CudaMemoryMeter(c10::DeviceIndex index) : index_(index) {
    if (c10::cuda::device_count() <= index)
      throw std::runtime_error("no CUDA device " + std::to_string(index) + " on this machine");
    size_t free_bytes = 0, total_bytes = 0;
    c10::cuda::set_device(index);
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
      throw std::runtime_error("cudaMemGetInfo failed on device " + std::to_string(index));
    total_bytes_ = static_cast<int64_t>(total_bytes);
  }
  ByteStat allocated() const override {
    const auto stats = alloc::getDeviceStats(index_);
    return {.current = stats.allocated_bytes[kAggregate].current,
            .peak = stats.allocated_bytes[kAggregate].peak};
  }
  ByteStat reserved() const override {
    const auto stats = alloc::getDeviceStats(index_);
    return {.current = stats.reserved_bytes[kAggregate].current,
            .peak = stats.reserved_bytes[kAggregate].peak};
  }
  void ResetPeak() override { alloc::resetPeakStats(index_); }
  void set_budget_bytes(int64_t bytes) override {
    budget_ = bytes;
    alloc::setMemoryFraction(
        bytes > 0 ? static_cast<double>(bytes) / static_cast<double>(total_bytes_) : 1.0, index_);
  }
  int64_t available_bytes() const override { return budget_ > 0 ? budget_ : total_bytes_; }

 private:
  c10::DeviceIndex index_;
  int64_t total_bytes_ = 0;
  int64_t budget_ = 0;
};

}  // namespace

std::unique_ptr<MemoryMeter> MakeCudaMemoryMeter(c10::DeviceIndex index) {
  return std::make_unique<CudaMemoryMeter>(index);
}

}  // namespace headroom
#else
namespace headroom {
std::unique_ptr<MemoryMeter> MakeCudaMemoryMeter(c10::DeviceIndex) {
  throw std::runtime_error("this build's LibTorch has no CUDA support");
}
}  // namespace headroom
#endif
