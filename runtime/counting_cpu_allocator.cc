#include "runtime/counting_cpu_allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include "planner/core/byte_units.h"
#include "planner/core/gpu_catalog.h"

namespace headroom {
namespace {

// Each allocation starts with a header of the alignment's size that records its size and
// owner, so that the data pointer is its own context: some of LibTorch's kernels use
// raw_allocate / raw_deleter, which need that.
constexpr size_t kAlignment = 64;  // what c10's default CPU allocator guarantees

struct Header {
  int64_t bytes;
  CountingCpuAllocator* owner;
};
static_assert(sizeof(Header) <= kAlignment);

Header* HeaderOf(void* data) {
  return reinterpret_cast<Header*>(static_cast<char*>(data) - kAlignment);
}

}  // namespace

c10::DataPtr CountingCpuAllocator::allocate(size_t bytes) {
  const auto n = static_cast<int64_t>(bytes);
  const int64_t now = current_.fetch_add(n) + n;
  const int64_t budget = budget_.load();
  if (budget > 0 && now > budget) {
    current_.fetch_sub(n);
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     "CPU out of memory (headroom budget): tried to allocate " + FormatBytes(n) +
                         " with " + FormatBytes(now - n) + " live of a " + FormatBytes(budget) +
                         " budget");
  }
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  void* base = nullptr;
  if (posix_memalign(&base, kAlignment, kAlignment + bytes) != 0) {
    current_.fetch_sub(n);
    throw std::bad_alloc();
  }
  *static_cast<Header*>(base) = {n, this};
  void* data = static_cast<char*>(base) + kAlignment;
  return {data, data, &CountingCpuAllocator::Delete, c10::Device(c10::DeviceType::CPU)};
}

void CountingCpuAllocator::Delete(void* data) {
  if (data == nullptr) return;
  Header* header = HeaderOf(data);
  header->owner->Release(header->bytes);
  std::free(header);
}

void CountingCpuAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

CpuMemoryMeter::CpuMemoryMeter()
    : allocator_(new CountingCpuAllocator()), previous_(c10::GetCPUAllocator()) {
  c10::SetCPUAllocator(allocator_, /*priority=*/100);
}

CpuMemoryMeter::~CpuMemoryMeter() {
  // Restoring needs a priority at least as high as the one we installed with.
  c10::SetCPUAllocator(previous_, /*priority=*/100);
}

int64_t CpuMemoryMeter::available_bytes() const {
  const int64_t budget = allocator_->budget_bytes();
  return budget > 0 ? budget : HostMemoryBytes();
}

}  // namespace headroom
