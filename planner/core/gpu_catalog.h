// The devices a plan targets: GPUs from the shipped catalog (planner/core/catalog/gpus.yaml),
// a custom memory budget, or the CPU.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/dtype.h"
#include "planner/core/embedded_file.h"
#include "planner/core/result.h"

namespace headroom {

std::span<const EmbeddedFile> GpuCatalogFiles();  // generated at build time

struct DeviceSpec {
  std::string name;
  std::string description;
  bool is_cuda = true;
  int64_t memory_bytes = 0;            // total device memory (the budget)
  int64_t context_bytes = 0;           // CUDA context, outside the allocator
  int64_t cublas_workspace_bytes = 0;  // allocated through the caching allocator
  double compute_capability = 0;
  std::map<std::string, double> peak_tflops;  // by dtype name: fp32, tf32, bf16, fp16
  double bandwidth_gbps = 0;
  double matmul_efficiency = 0.5;
  double bandwidth_efficiency = 0.8;
  double link_gbps = 0;       // per GPU, one direction, to the GPUs of its node
  double network_gbps = 0;    // per GPU, one direction, to other nodes
  double host_link_gbps = 0;  // to the host (PCIe), one direction
  // false for a memory budget alone (--gpu-mem): its speed figures (an A100's) only rank
  // plans, and the reports print no time for it.
  bool speed_basis = true;

  bool supports_bf16() const { return compute_capability >= 8.0 || !is_cuda; }

  // The device facts every consumer of a timeline needs; the one place that asks is_cuda.
  // A GPU's caching allocator rounds every block to 512 bytes; the CPU allocates exactly.
  int64_t AllocationGranularity() const { return is_cuda ? kCudaAllocationGranularity : 1; }
  // Outside the allocator: the CUDA context (none on the CPU).
  int64_t ContextBytes() const { return is_cuda ? context_bytes : 0; }
  // cuBLAS's workspaces, allocated through the caching allocator on first use, one per
  // (handle, stream) (`cublas_handle_stream_to_workspace`, ATen/cuda/CublasHandlePool.cpp),
  // and handles are per thread (a thread-local window on `DeviceThreadHandlePool`). A
  // training step uses two threads: the caller's (the forward) and the autograd engine's
  // thread for the CUDA device (the backward and its recomputation;
  // torch/csrc/autograd/engine.cpp `device_ready_queues_`). The H200 check
  // (docs/runtime.md) measured no step less than 32.0 MiB above one workspace.
  int64_t CublasWorkspaceBytes() const {
    return is_cuda ? kCublasHandlesInAStep * cublas_workspace_bytes : 0;
  }
  static constexpr int64_t kCublasHandlesInAStep = 2;
  // The peak that counts against the budget: what the device reports (nvidia-smi:
  // allocator segments plus context) on a GPU, the live tensor bytes on the CPU.
  int64_t PeakAgainstBudget(int64_t allocated_peak, int64_t device_peak) const {
    return is_cuda ? device_peak : allocated_peak;
  }
  // PyTorch's name of the device type: "cuda" or "cpu".
  std::string_view TypeName() const { return is_cuda ? "cuda" : "cpu"; }

  static constexpr int64_t kCudaAllocationGranularity = 512;
};

std::vector<DeviceSpec> GpuCatalog();
std::vector<std::string> GpuNames();
// A catalog GPU by name (case-insensitive); unknown names suggest close ones.
Result<DeviceSpec> FindGpu(std::string_view name);
// The catalog GPU a CUDA device's name (cudaDeviceProp::name, e.g. "NVIDIA A100-SXM4-80GB")
// names: every word of the entry's model ("A100", "RTX 4090") is a word of the name; of
// several (A100 40GB and 80GB), the one whose memory is nearest `total_bytes`.
std::optional<DeviceSpec> MatchGpu(std::string_view device_name, int64_t total_bytes);
// A GPU with only a memory budget: context and workspace of a typical recent GPU.
DeviceSpec CustomGpu(int64_t memory_bytes);
// The CPU: no allocator cache, no context; budget is the given bytes.
DeviceSpec CpuDevice(int64_t memory_bytes);
// CustomGpu or CpuDevice, by the kind of device.
inline DeviceSpec DeviceWithMemory(bool cuda, int64_t memory_bytes) {
  return cuda ? CustomGpu(memory_bytes) : CpuDevice(memory_bytes);
}
// Physical memory of this machine (for --device cpu without a budget).
int64_t HostMemoryBytes();

}  // namespace headroom
