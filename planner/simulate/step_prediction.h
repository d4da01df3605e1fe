// The prediction for one training configuration on one device: the three peaks
// (allocated, reserved, device), where the allocated peak happens and what it is made
// of, and whether it fits. Built by replaying the simulator's timeline through the
// live-bytes and caching-allocator consumers.
#pragma once

#include "planner/simulate/layer.h"

#include <cstdint>
#include <string>
#include <vector>

#include "planner/core/gpu_catalog.h"
#include "planner/core/training_config.h"
#include "planner/graph/op_graph.h"
#include "planner/simulate/memory_category.h"
#include "planner/simulate/memory_timeline.h"
#include "planner/simulate/step_simulator.h"

namespace headroom {

struct StepPrediction {
  bool fits = false;
  int64_t budget_bytes = 0;          // device memory
  int64_t allocated_peak_bytes = 0;  // live tensors (max_memory_allocated)
  int64_t reserved_peak_bytes = 0;   // caching allocator segments (max_memory_reserved)
  int64_t device_peak_bytes = 0;     // reserved + CUDA context (what nvidia-smi shows)
  Phase peak_phase;
  std::string peak_phase_text;
  CategoryBytes breakdown{};           // by category at the allocated peak
  int64_t first_step_peak_bytes = 0;   // allocated peak of step 1 (optimizer states appear)
  int64_t steady_step_peak_bytes = 0;  // allocated peak of step 2 onwards
  std::string oom_phase_text;          // where the allocator model ran out, if it did
  int64_t params_total = 0;
  int64_t params_trainable = 0;
  int64_t rank = 0;               // the data-parallel rank predicted: the busiest
  int64_t offload_cpu_bytes = 0;  // CPU RAM per rank for what --offload moved there
  // Pinned host memory per rank for --activation-offload: every checkpointed block's input,
  // each rounded up to a power of two by torch's CachingHostAllocator.
  int64_t activation_offload_host_bytes = 0;
  std::vector<bool> checkpointed;
  Timeline timeline;

  int64_t headroom_bytes() const { return budget_bytes - device_peak_bytes; }
};

StepPrediction PredictStep(const OpGraph& graph, const TrainingConfig& config,
                           const std::vector<bool>& checkpointed, const DeviceSpec& device);
// The same with tables built once for several checkpoint sets of one configuration.
StepPrediction PredictStep(const SimulationTables& tables, const std::vector<bool>& checkpointed,
                           const DeviceSpec& device);

}  // namespace headroom
