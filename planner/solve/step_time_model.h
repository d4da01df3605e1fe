// Step-time model: each op is priced by a roofline — its FLOPs against the device's
// peak throughput for the compute dtype, its bytes moved against memory bandwidth, the
// slower of the two, each scaled by the catalog's efficiency factor — plus a fixed
// kernel-launch overhead. Recomputation of checkpointed blocks is priced by the same
// forward rule; the optimizer step is memory-bound over weights, gradients and states.
#pragma once

#include "planner/solve/layer.h"

#include <functional>
#include <vector>

#include "planner/core/gpu_catalog.h"
#include "planner/core/training_config.h"
#include "planner/graph/op_graph.h"
#include "planner/simulate/step_simulator.h"
#include "planner/simulate/tensor_states.h"
#include "planner/solve/comm_time_model.h"

namespace headroom {

// Per-op launch and framework overhead; it is what makes larger micro-batches faster
// per token when the roofline alone would not.
inline constexpr double kKernelOverheadSeconds = 5e-6;

struct StepTime {
  double forward_seconds = 0;    // one micro-batch
  double backward_seconds = 0;   // one micro-batch
  double recompute_seconds = 0;  // one micro-batch, checkpointed blocks only
  // One micro-batch: --activation-offload's copies of the checkpointed blocks' inputs, to
  // the host in the forward and back in the backward, on the compute stream.
  double activation_offload_seconds = 0;
  double optimizer_seconds = 0;  // once per step
  // Data parallelism: the collectives' time not hidden behind compute (comm_time_model.h).
  double communication_seconds = 0;
  // grad_accum x (forward + backward + recompute + activation offload) + optimizer +
  // communication
  double step_seconds = 0;
  // Over all ranks: ranks x micro_batch x grad_accum x seq_len / step_seconds.
  double tokens_per_second = 0;
  double tokens_per_second_per_gpu = 0;
  // Model FLOPs utilization: the FLOPs of forward and backward (recomputation not
  // counted, as PaLM's MFU defines it) over the step time, against the dense peak of the
  // compute dtype.
  double mfu = 0;
};

class StepTimeModel {
 public:
  StepTimeModel(const OpGraph& graph, const TrainingConfig& config, const DeviceSpec& device);
  // The same from a simulation's tables (config's precision): their states, and which
  // ops' outputs alias an input (no kernel), tabulated once for every micro-batch.
  StepTimeModel(const SimulationTables& tables, const TrainingConfig& config,
                const DeviceSpec& device);

  // Forward seconds of each block at the config's micro-batch: what recomputing it costs.
  const std::vector<double>& block_forward_seconds() const { return block_forward_; }
  StepTime Estimate(const std::vector<bool>& checkpointed) const;

 private:
  // With the graph's tensor states under config.precision.
  StepTimeModel(const OpGraph& graph, const TensorStates& states, const TrainingConfig& config,
                const DeviceSpec& device);
  // `aliases(op)`: whether the op's output aliases an input; `tensor_bytes`: each tensor's
  // bytes at the config's micro-batch.
  StepTimeModel(const OpGraph& graph, const TensorStates& states, const TrainingConfig& config,
                const DeviceSpec& device, const std::function<bool(OpId)>& aliases,
                const std::vector<double>& tensor_bytes);

  double forward_ = 0, backward_ = 0, optimizer_ = 0;
  double model_flops_ = 0;  // forward + backward of one micro-batch on one rank
  double peak_flops_ = 0;   // dense, at the compute dtype
  std::vector<double> block_forward_;
  std::vector<double> block_offload_;  // per block: its input's copies out and back
  double tokens_per_step_ = 0;         // on one rank
  int64_t grad_accum_ = 1;
  Parallelism parallel_;
  CommVolume comm_volume_;
  DeviceSpec device_;
};

}  // namespace headroom
