// A CPU allocator for LibTorch that counts live tensor bytes (current and peak) and can
// enforce a budget, failing an allocation the way the CUDA caching allocator does
// (c10::OutOfMemoryError). Installed as LibTorch's CPU allocator for the lifetime of a
// CpuMemoryMeter; what it counts is exactly the tensor storage the planner predicts
// (requested bytes, no rounding), not the malloc heap.
#pragma once

#include <atomic>
#include <cstdint>

#include <c10/core/Allocator.h>

#include "runtime/memory_meter.h"

namespace headroom {

class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  ByteStat bytes() const { return {.current = current_.load(), .peak = peak_.load()}; }
  void ResetPeak() { peak_.store(current_.load()); }
  // 0: unlimited. An allocation that would take the live bytes past it throws.
  void set_budget_bytes(int64_t budget) { budget_.store(budget); }
  int64_t budget_bytes() const { return budget_.load(); }

 private:
  static void Delete(void* data);
  void Release(int64_t bytes) { current_.fetch_sub(bytes); }

  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> budget_{0};
};

// Installs a CountingCpuAllocator as LibTorch's CPU allocator while alive. Tensors
// allocated before keep their own deleters, so swapping is safe at any time.
class CpuMemoryMeter final : public MemoryMeter {
 public:
  CpuMemoryMeter();
  ~CpuMemoryMeter() override;
  CpuMemoryMeter(const CpuMemoryMeter&) = delete;
  CpuMemoryMeter& operator=(const CpuMemoryMeter&) = delete;

  CountingCpuAllocator& allocator() { return *allocator_; }

  ByteStat allocated() const override { return allocator_->bytes(); }
  ByteStat reserved() const override { return allocator_->bytes(); }
  void ResetPeak() override { allocator_->ResetPeak(); }
  void set_budget_bytes(int64_t bytes) override { allocator_->set_budget_bytes(bytes); }
  int64_t available_bytes() const override;

 private:
  CountingCpuAllocator* allocator_;  // leaked on purpose: tensors may outlive the meter
  c10::Allocator* previous_;
};

}  // namespace headroom
