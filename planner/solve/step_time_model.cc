#include "planner/solve/step_time_model.h"

#include <algorithm>

#include "planner/simulate/op_cost.h"
#include "planner/simulate/optimizer_model.h"
#include "planner/simulate/tensor_states.h"

namespace headroom {
namespace {

// Products run at the device's matrix rate; the rest is bound by memory bandwidth.
bool IsMatmul(const OpNode& op) {
  return ClassOfOp(op) == OpClass::kMatmul || ClassOfOp(op) == OpClass::kAttention;
}

// On a CPU without AVX-512, bf16 products go through ATen's own gemm, far slower than
// fp32's: GPT-2's LM head, [512 x 768] x [768 x 50257], took 40.3 s in bf16 against 1.52 s
// in fp32 on one thread of this project's AVX2 machine (torch 2.15).
constexpr double kAtenBf16GemmSlowdown = 26.5;

// The data sheet's dense peak for the compute dtype.
double DataSheetFlops(const DeviceSpec& device, DType compute) {
  const char* name = compute == DType::kBF16 ? "bf16" : compute == DType::kF16 ? "fp16" : "fp32";
  auto it = device.peak_tflops.find(name);
  if (it == device.peak_tflops.end()) it = device.peak_tflops.find("fp32");
  return it->second * 1e12;
}

// What large training GEMMs reach.
double PeakFlops(const DeviceSpec& device, DType compute, CpuBf16 cpu_bf16) {
  if (!device.is_cuda && compute == DType::kBF16 && cpu_bf16 == CpuBf16::kAtenGemm)
    return PeakFlops(device, DType::kF32, cpu_bf16) / kAtenBf16GemmSlowdown;
  return DataSheetFlops(device, compute) * device.matmul_efficiency;
}

// torch.optim's AdamW without `fused` (torch/optim/adam.py, _multi_tensor_adam and
// _single_tensor_adam) passes over the parameter-sized tensors once per step of the
// update: weight decay (read p, write p), lerp of m (3), mul of v (2), addcmul of v
// (4), sqrt, division and eps on the denominator (2 each), addcdiv into p (4): 21
// tensor accesses. The fused kernel reads p, g, m, v and writes p, m, v: 7. The memory
// traffic below is the fused kernel's; the others move this many times as much.
constexpr double kUnfusedAdamTraffic = 21.0 / 7.0;

double OptimizerTrafficFactor(const TrainingConfig& config) {
  const bool adam = config.optimizer == OptimizerKind::kAdamW;
  return adam && EffectiveOptimizerImpl(config) != OptimizerImpl::kFused ? kUnfusedAdamTraffic
                                                                         : 1.0;
}

std::vector<double> TensorBytes(const OpGraph& graph, const TensorStates& states,
                                const ShapeEnv& env) {
  std::vector<double> bytes(graph.num_tensors());
  for (int t = 0; t < graph.num_tensors(); ++t)
    bytes[t] = static_cast<double>(states.Bytes(graph, TensorId{t}, env));
  return bytes;
}

// The tables hold the sizes already, at micro-batch 1: no shape is evaluated again.
std::vector<double> TensorBytes(const SimulationTables& tables, int64_t micro_batch) {
  std::vector<double> bytes(tables.graph().num_tensors());
  for (int t = 0; t < tables.graph().num_tensors(); ++t)
    bytes[t] = static_cast<double>(tables.TensorBytes(TensorId{t}, micro_batch));
  return bytes;
}

// --activation-offload: save_on_cpu copies each checkpointed block's input out and back,
// pinned, on the compute stream (not overlapped), at the host link's rate.
std::vector<double> BlockOffloadSeconds(const OpGraph& graph, const TrainingConfig& config,
                                        const DeviceSpec& device,
                                        const std::vector<double>& tensor_bytes) {
  std::vector<double> seconds(graph.blocks().size(), 0.0);
  if (!config.activation_offload || !device.is_cuda) return seconds;
  constexpr double kPinnedCopyEfficiency = 0.8;  // of the link's rate: pinned memcpy
  const double host_bytes_per_s = device.host_link_gbps * 1e9 * kPinnedCopyEfficiency;
  for (size_t b = 0; b < seconds.size(); ++b)
    seconds[b] = 2.0 * tensor_bytes[graph.blocks()[b].input.value] / host_bytes_per_s;
  return seconds;
}

}  // namespace

StepTimeModel::StepTimeModel(const OpGraph& graph, const TrainingConfig& config,
                             const DeviceSpec& device)
    : StepTimeModel(graph, TensorStates(graph, RegimeOf(config), CostTargetOf(config)), config,
                    device) {}

StepTimeModel::StepTimeModel(const OpGraph& graph, const TensorStates& states,
                             const TrainingConfig& config, const DeviceSpec& device)
    : StepTimeModel(
          graph, states, config, device,
          [&](OpId o) {
            return CostForward(graph, graph.op(o), states,
                               ShapeEnv{config.micro_batch, config.seq_len}, true)
                .output_aliases_input;
          },
          TensorBytes(graph, states, ShapeEnv{config.micro_batch, config.seq_len})) {}

StepTimeModel::StepTimeModel(const SimulationTables& tables, const TrainingConfig& config,
                             const DeviceSpec& device)
    : StepTimeModel(
          tables.graph(), tables.states(), config, device,
          [&](OpId o) { return tables.OutputAliasesInput(o); },
          TensorBytes(tables, config.micro_batch)) {}

StepTimeModel::StepTimeModel(const OpGraph& graph, const TensorStates& states,
                             const TrainingConfig& config, const DeviceSpec& device,
                             const std::function<bool(OpId)>& aliases,
                             const std::vector<double>& tensor_bytes)
    : block_forward_(graph.blocks().size(), 0.0),
      block_offload_(BlockOffloadSeconds(graph, config, device, tensor_bytes)),
      tokens_per_step_(
          static_cast<double>(config.micro_batch * config.grad_accum_steps * config.seq_len)),
      grad_accum_(config.grad_accum_steps),
      parallel_(config.parallel),
      device_(device) {
  peak_flops_ = DataSheetFlops(device, states.regime().compute_dtype);
  const ShapeEnv env{config.micro_batch, config.seq_len};
  const double flops_per_s =
      PeakFlops(device, states.regime().compute_dtype, config.kernels.cpu_bf16);
  const double bytes_per_s = device.bandwidth_gbps * 1e9 * device.bandwidth_efficiency;
  const std::vector<int64_t> executions = graph.ExecutionsPerOp();  // RepeatedOps
  for (int o = 0; o < graph.num_ops(); ++o) {
    const OpNode& op = graph.op(OpId{o});
    // Views, and casts to the dtype a tensor already has (`.to()` returns it), launch no
    // kernel.
    if (ClassOfOp(op) == OpClass::kLayout || aliases(OpId{o})) continue;
    const OpFlops flops = CostFlops(graph, op, states, env);
    double bytes = 0;
    for (TensorId t : op.inputs) bytes += tensor_bytes[t.value];
    for (TensorId t : op.outputs) bytes += tensor_bytes[t.value];
    const double compute_rate =
        IsMatmul(op) ? flops_per_s : bytes_per_s * 4;  // elementwise: memory-bound
    const double fwd =
        std::max(flops.forward / compute_rate, bytes / bytes_per_s) + kKernelOverheadSeconds;
    // Backward reads the saved tensors and output gradients and writes input gradients:
    // about twice the forward traffic.
    const double bwd = flops.backward > 0
                           ? std::max(flops.backward / compute_rate, 2 * bytes / bytes_per_s) +
                                 2 * kKernelOverheadSeconds
                           : 0.0;
    const auto times = static_cast<double>(executions[o]);
    forward_ += times * fwd;
    backward_ += times * bwd;
    model_flops_ += times * (flops.forward + flops.backward);
    if (op.block >= 0) block_forward_[op.block] += times * fwd;
  }
  const PrecisionRegime& regime = states.regime();
  for (TensorId p : graph.Parameters()) {
    const TensorInfo& t = graph.tensor(p);
    comm_volume_.param_bytes += tensor_bytes[p.value];
    if (!t.param.trainable) continue;
    comm_volume_.trainable_bytes += tensor_bytes[p.value];
    const OptimizerParamCost cost =
        CostOptimizer(config.optimizer, EffectiveOptimizerImpl(config), t.shape,
                      states.OptimizerStateDType(p), regime.master_weights, false);
    double bytes = 2.0 * 2.0 * tensor_bytes[p.value];  // weight and gradient, read + write
    for (int64_t s : cost.state_bytes) bytes += 2.0 * static_cast<double>(s);
    if (regime.master_weights) bytes += 2.0 * 4.0 * static_cast<double>(t.shape.Numel({}));
    optimizer_ += OptimizerTrafficFactor(config) * bytes / bytes_per_s + kKernelOverheadSeconds;
  }
}

StepTime StepTimeModel::Estimate(const std::vector<bool>& checkpointed) const {
  StepTime t;
  t.forward_seconds = forward_;
  t.backward_seconds = backward_;
  for (size_t i = 0; i < checkpointed.size() && i < block_forward_.size(); ++i) {
    if (!checkpointed[i]) continue;
    t.recompute_seconds += block_forward_[i];
    t.activation_offload_seconds += block_offload_[i];
  }
  // Sharded optimizer states are updated on one rank's share.
  const bool sharded_states =
      parallel_.sharding == Sharding::kZero1 || parallel_.fsdp() || parallel_.deepspeed_zero();
  t.optimizer_seconds =
      sharded_states ? optimizer_ / static_cast<double>(parallel_.gpus) : optimizer_;
  t.communication_seconds = EstimateComm(parallel_, comm_volume_, grad_accum_, t.forward_seconds,
                                         t.backward_seconds + t.recompute_seconds, device_)
                                .exposed_seconds;
  t.step_seconds =
      static_cast<double>(grad_accum_) * (t.forward_seconds + t.backward_seconds +
                                          t.recompute_seconds + t.activation_offload_seconds) +
      t.optimizer_seconds + t.communication_seconds;
  t.tokens_per_second_per_gpu = t.step_seconds > 0 ? tokens_per_step_ / t.step_seconds : 0.0;
  t.tokens_per_second = t.tokens_per_second_per_gpu * static_cast<double>(parallel_.gpus);
  t.mfu = t.step_seconds > 0
              ? static_cast<double>(grad_accum_) * model_flops_ / (t.step_seconds * peak_flops_)
              : 0.0;
  return t;
}

}  // namespace headroom
