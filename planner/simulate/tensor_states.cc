#include "planner/simulate/tensor_states.h"

namespace headroom {
namespace {

bool LowersUnderAutocast(OpKind k) {
  return k == OpKind::kLinear || k == OpKind::kAttnScores || k == OpKind::kAttnContext ||
         k == OpKind::kSdpa;
}

bool Fp32UnderAutocast(OpKind k, bool cuda) {
  if (k == OpKind::kLogSoftmax || k == OpKind::kNllLoss) return true;
  return cuda && (k == OpKind::kLayerNorm || k == OpKind::kSoftmax || k == OpKind::kCube);
}

}  // namespace

int64_t Nf4StorageBytes(int64_t numel) {
  const int64_t blocks = (numel + 63) / 64;
  return StorageBytes(DType::kNF4, numel) + blocks + 4 * ((blocks + 255) / 256);
}

CostTarget CostTargetOf(const TrainingConfig& config) {
  CostTarget target;
  if (config.fine_tune.mode != FineTuneMode::kFull) target.frozen_dtype = FrozenWeightDType(config);
  const bool python = RunsPythonStack(config.stack);
  target.dropout_bool_mask = config.kernels.cuda || !python;
  if (!config.kernels.cuda) target.cpu_bf16_matmul = config.kernels.cpu_bf16;
  target.cuda_autocast = config.kernels.cuda;
  target.fp32_adapters = python;
  target.reentrant_checkpoint = !python;
  target.torch_optim = python;
  // From the policy, like the KV cache: when the solver chooses the checkpoint set, its
  // candidates share one set of tables without this (two b x s x h tensors).
  target.input_embeddings_require_grad =
      python && config.checkpoint.kind != CheckpointPolicy::Kind::kNone;
  // The CPU generator's state (mt19937 and its normal-sampling cache) is 5056 bytes; a
  // CUDA generator's state is a host tensor too, outside device memory.
  constexpr int64_t kCpuRngStateBytes = 5056;
  if (!config.kernels.cuda) target.checkpoint_rng_state_bytes = kCpuRngStateBytes;
  return target;
}

TensorStates::TensorStates(const OpGraph& graph, const PrecisionRegime& regime,
                           const CostTarget& target)
    : regime_(regime), target_(target), states_(graph.num_tensors()) {
  for (int i = 0; i < graph.num_tensors(); ++i) {
    const TensorInfo& t = graph.tensor(TensorId{i});
    if (t.role == TensorRole::kParameter) {
      states_[i].requires_grad = t.param.trainable;
      states_[i].dtype = t.param.quantized ? DType::kNF4
                         : t.param.lora_adapter
                             ? (target.fp32_adapters ? DType::kF32 : AdapterDType(regime))
                         : t.param.trainable ? regime.param_dtype
                                             : target.frozen_dtype.value_or(regime.frozen_dtype);
    } else if (t.role == TensorRole::kInput) {
      states_[i].dtype = t.fixed_dtype.value_or(DType::kI64);
    }
  }
  for (int o = 0; o < graph.num_ops(); ++o) {
    const OpNode& op = graph.op(OpId{o});
    bool any_grad = false;
    for (TensorId in : op.inputs) any_grad = any_grad || states_[in.value].requires_grad;
    if (op.kind == OpKind::kRopeTables || op.kind == OpKind::kCausalMask) any_grad = false;
    const DType dtype = OutputDType(graph, op);
    for (TensorId out : op.outputs) {
      const TensorInfo& t = graph.tensor(out);
      const bool hooked = target.input_embeddings_require_grad && out == graph.input_embeddings();
      states_[out.value] = {t.fixed_dtype.value_or(dtype), any_grad || hooked};
    }
  }
}

DType TensorStates::OutputDType(const OpGraph& graph, const OpNode& op) const {
  auto in = [&](size_t i) { return states_[op.inputs[i].value].dtype; };
  (void)graph;
  switch (op.kind) {
    case OpKind::kEmbedding:
      return in(1);
    case OpKind::kLinear:
      if (regime_.autocast || in(1) == DType::kNF4) return regime_.compute_dtype;
      return PromoteTypes(in(0), in(1));
    case OpKind::kAttnScores: {
      // The mask is added after the (autocast) matmul, with type promotion.
      const DType product = regime_.autocast ? regime_.compute_dtype : PromoteTypes(in(0), in(1));
      return op.inputs.size() > 2 ? PromoteTypes(product, in(2)) : product;
    }
    case OpKind::kAttnContext:
    case OpKind::kSdpa:
      return regime_.autocast ? regime_.compute_dtype : PromoteTypes(in(0), in(1));
    case OpKind::kSoftmax:
      if (op.upcast) return DType::kF32;
      [[fallthrough]];
    case OpKind::kLayerNorm:
    case OpKind::kCube:
      return regime_.autocast && Fp32UnderAutocast(op.kind, target_.cuda_autocast) ? DType::kF32
                                                                                   : in(0);
    case OpKind::kCastLike:
      return in(1);
    case OpKind::kRmsNorm:
      return PromoteTypes(in(0), in(1));
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kRope:
      return PromoteTypes(in(0), in(1));
    case OpKind::kCastF32:
    case OpKind::kNllLoss:
      return DType::kF32;
    default:
      return in(0);
  }
}

DType TensorStates::OptimizerStateDType(TensorId param) const {
  if (target_.torch_optim && !regime_.master_weights) return states_.at(param.value).dtype;
  return regime_.optimizer_state_dtype;
}

DType TensorStates::UsedDType(const OpNode& op, size_t index) const {
  const DType d = states_.at(op.inputs[index].value).dtype;
  if (!regime_.autocast || !IsFloatingPoint(d)) return d;
  if (op.kind == OpKind::kAttnScores && index == 2) return d;  // the mask: added, not multiplied
  if (LowersUnderAutocast(op.kind)) return regime_.compute_dtype;
  if (Fp32UnderAutocast(op.kind, target_.cuda_autocast)) return DType::kF32;
  return d;
}

int64_t TensorStates::Bytes(const OpGraph& graph, TensorId id, const ShapeEnv& env) const {
  const int64_t numel = graph.tensor(id).shape.Numel(env);
  const DType d = states_.at(id.value).dtype;
  return d == DType::kNF4 ? Nf4StorageBytes(numel) : StorageBytes(d, numel);
}

}  // namespace headroom
