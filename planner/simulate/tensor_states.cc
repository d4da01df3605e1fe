#include "planner/simulate/tensor_states.h"

namespace headroom {
namespace {

// How autocast treats an op's floating-point inputs.
enum class Autocast {
  kKeeps,       // runs in the inputs' dtypes
  kLowers,      // casts them to the 16-bit compute dtype (autocast's lower-precision list)
  kFp32,        // casts them to fp32 (the losses)
  kFp32OnCuda,  // fp32 under CUDA's autocast; the CPU's keeps the input dtype
};

// What a dtype rule reads: the op, its inputs' dtypes, the regime and the target.
struct DTypeRuleInputs {
  const OpNode& op;
  const std::vector<TensorState>& states;
  const PrecisionRegime& regime;
  const CostTarget& target;

  DType in(size_t i) const { return states[op.inputs[i].value].dtype; }
  DType promoted() const { return PromoteTypes(in(0), in(1)); }
  // A product's result: the compute dtype under autocast, else the promoted inputs.
  DType product() const { return regime.autocast ? regime.compute_dtype : promoted(); }
};

// One specialization per op kind (planner/graph/op_kinds.h): kAutocast, and Output(),
// the dtype of the op's outputs. A kind without one fails to compile in VisitOpKind.
template <OpKind K>
struct DTypeRule;

// The output keeps input 0's dtype, and autocast leaves the op alone.
struct KeepsInputDType {
  static constexpr Autocast kAutocast = Autocast::kKeeps;
  static DType Output(const DTypeRuleInputs& r) { return r.in(0); }
};
struct PromotesInputs {
  static constexpr Autocast kAutocast = Autocast::kKeeps;
  static DType Output(const DTypeRuleInputs& r) { return r.promoted(); }
};
struct LowersUnderAutocast {
  static constexpr Autocast kAutocast = Autocast::kLowers;
  static DType Output(const DTypeRuleInputs& r) { return r.product(); }
};
struct Fp32Result {
  static DType Output(const DTypeRuleInputs&) { return DType::kF32; }
};
// fp32 under CUDA's autocast, else the input's dtype.
struct Fp32OnCudaAutocast {
  static constexpr Autocast kAutocast = Autocast::kFp32OnCuda;
  static DType Output(const DTypeRuleInputs& r) {
    return r.regime.autocast && r.target.cuda_autocast ? DType::kF32 : r.in(0);
  }
};

template <>
struct DTypeRule<OpKind::kEmbedding> {
  static constexpr Autocast kAutocast = Autocast::kKeeps;
  static DType Output(const DTypeRuleInputs& r) { return r.in(1); }  // the table's
};
template <>
struct DTypeRule<OpKind::kLinear> {
  static constexpr Autocast kAutocast = Autocast::kLowers;
  static DType Output(const DTypeRuleInputs& r) {
    return r.in(1) == DType::kNF4 ? r.regime.compute_dtype : r.product();
  }
};
template <>
struct DTypeRule<OpKind::kLayerNorm> : Fp32OnCudaAutocast {};
template <>
struct DTypeRule<OpKind::kRmsNorm> : PromotesInputs {};
template <>
struct DTypeRule<OpKind::kGemmaRmsNorm> : KeepsInputDType {};  // output.type_as(x)
template <>
struct DTypeRule<OpKind::kAdd> : PromotesInputs {};
template <>
struct DTypeRule<OpKind::kMul> : PromotesInputs {};
template <>
struct DTypeRule<OpKind::kScale> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kGelu> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kGeluTanh> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kSilu> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kTanh> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kContiguous> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kCastLike> {
  static constexpr Autocast kAutocast = Autocast::kKeeps;
  static DType Output(const DTypeRuleInputs& r) { return r.in(1); }
};
template <>
struct DTypeRule<OpKind::kCube> : Fp32OnCudaAutocast {};
template <>
struct DTypeRule<OpKind::kAddScalar> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kKvCacheCopy> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kDropout> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kRopeTables> : KeepsInputDType {};  // the hidden states'
template <>
struct DTypeRule<OpKind::kRope> : PromotesInputs {};
template <>
struct DTypeRule<OpKind::kCausalMask> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kWindowMask> : KeepsInputDType {};  // bool (fixed)
template <>
struct DTypeRule<OpKind::kView> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kRepeatKv> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kMergeHeads> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kAttnScores> {
  static constexpr Autocast kAutocast = Autocast::kLowers;  // not the mask (see UsedDType)
  // The mask is added after the (autocast) matmul, with type promotion.
  static DType Output(const DTypeRuleInputs& r) {
    return r.op.inputs.size() > 2 ? PromoteTypes(r.product(), r.in(2)) : r.product();
  }
};
template <>
struct DTypeRule<OpKind::kSoftmax> {
  static constexpr Autocast kAutocast = Autocast::kFp32OnCuda;
  static DType Output(const DTypeRuleInputs& r) {
    return r.op.upcast ? DType::kF32 : Fp32OnCudaAutocast::Output(r);
  }
};
template <>
struct DTypeRule<OpKind::kAttnContext> : LowersUnderAutocast {};
template <>
struct DTypeRule<OpKind::kSdpa> : LowersUnderAutocast {};
template <>
struct DTypeRule<OpKind::kCastF32> : Fp32Result {
  static constexpr Autocast kAutocast = Autocast::kKeeps;
};
template <>
struct DTypeRule<OpKind::kLogSoftmax> {
  static constexpr Autocast kAutocast = Autocast::kFp32;
  static DType Output(const DTypeRuleInputs& r) { return r.in(0); }  // fp32 logits already
};
template <>
struct DTypeRule<OpKind::kNllLoss> : Fp32Result {
  static constexpr Autocast kAutocast = Autocast::kFp32;
};
// TRL's ChunkedLogProbFunction is no autocast op: it casts the hidden state and the weight
// to autocast's dtype itself, tile by tile (chunked_loss.h); the loss is fp32.
template <>
struct DTypeRule<OpKind::kChunkedNll> : Fp32Result {
  static constexpr Autocast kAutocast = Autocast::kKeeps;
};
template <>
struct DTypeRule<OpKind::kTopK> : KeepsInputDType {};  // the indices are int64 (fixed)
template <>
struct DTypeRule<OpKind::kRenormalize> : KeepsInputDType {};
template <>
struct DTypeRule<OpKind::kExpertSort> : KeepsInputDType {};  // int64 ids, int32 offsets
template <>
struct DTypeRule<OpKind::kGatherRows> : KeepsInputDType {};
// grouped_mm is not autocast-enabled; transformers casts x to the weights' dtype
// (integrations/moe.py:379, UsedDType), so the product is in the weights' dtype.
template <>
struct DTypeRule<OpKind::kGroupedMm> {
  static constexpr Autocast kAutocast = Autocast::kKeeps;
  static DType Output(const DTypeRuleInputs& r) { return r.in(1); }
};
template <>
struct DTypeRule<OpKind::kSumTopK> : KeepsInputDType {};
// An imported op: autocast's casts were recorded as ops of their own, and every output
// carries the dtype it was recorded with (TensorInfo::fixed_dtype), which wins over this.
template <>
struct DTypeRule<OpKind::kTraced> {
  static constexpr Autocast kAutocast = Autocast::kKeeps;
  static DType Output(const DTypeRuleInputs& r) {
    return r.op.inputs.empty() ? DType::kF32 : r.in(0);
  }
};

Autocast AutocastOf(OpKind kind) {
  return VisitOpKind(kind, []<OpKind K>() { return DTypeRule<K>::kAutocast; });
}

}  // namespace

int64_t Nf4Blocks(int64_t numel) { return (numel + 63) / 64; }

int64_t Nf4StorageBytes(int64_t numel) {
  constexpr int64_t kQuantStateCodeBytes = 4 * 16 + 4 * 256 + 4;  // codes and offset
  const int64_t blocks = Nf4Blocks(numel);
  return StorageBytes(DType::kNF4, numel) + blocks + 4 * ((blocks + 255) / 256) +
         kQuantStateCodeBytes;
}

CostTarget CostTargetOf(const TrainingConfig& config) {
  CostTarget target;
  if (config.fine_tune.mode != FineTuneMode::kFull) target.frozen_dtype = FrozenWeightDType(config);
  const bool python = RunsPythonStack(config.stack);
  target.dropout_bool_mask = config.kernels.cuda || !python;
  if (!config.kernels.cuda) target.cpu_bf16_matmul = config.kernels.cpu_bf16;
  target.cpu_threads = std::max(1, config.kernels.cpu_threads);
  target.conv1d_weights = python;
  target.cuda_autocast = config.kernels.cuda;
  target.fp32_adapters = python;
  target.reentrant_checkpoint = !python;
  target.torch_optim = python;
  target.cuda_device = config.kernels.cuda;
  if (const std::optional<FsdpPolicy> policy = FsdpPolicyOf(config)) {
    target.gathered_dtype = policy->param_dtype;
    target.fsdp_reduce_dtype = policy->reduce_dtype;
  }
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
      const DType stored = t.param.quantized ? DType::kNF4
                           : t.param.lora_adapter
                               ? (target.fp32_adapters ? DType::kF32 : AdapterDType(regime))
                           : t.param.trainable ? regime.param_dtype
                                               : target.frozen_dtype.value_or(regime.frozen_dtype);
      states_[i].stored_dtype = stored;
      const bool cast = target.gathered_dtype && stored != DType::kNF4 && IsFloatingPoint(stored);
      states_[i].dtype = cast ? *target.gathered_dtype : stored;
    } else if (t.role == TensorRole::kBuffer && !t.fixed_dtype) {
      states_[i].dtype = target.frozen_dtype.value_or(regime.frozen_dtype);  // cast with the model
    } else if (t.role == TensorRole::kInput || t.role == TensorRole::kBuffer) {
      states_[i].dtype = t.fixed_dtype.value_or(DType::kI64);
    }
  }
  for (int o = 0; o < graph.num_ops(); ++o) {
    const OpNode& op = graph.op(OpId{o});
    bool any_grad = false;
    // CastLike(x, like) is x.to(like.dtype) (PEFT's _cast_input_dtype before lora_A): only
    // x is the op's input to autograd, so a trainable `like` makes no gradient flow.
    const size_t grad_inputs = op.kind == OpKind::kCastLike ? 1 : op.inputs.size();
    for (size_t i = 0; i < grad_inputs; ++i)
      any_grad = any_grad || states_[op.inputs[i].value].requires_grad;
    if (ClassOfOp(op) == OpClass::kConstant) any_grad = false;
    const DType dtype = OutputDType(op);
    for (TensorId out : op.outputs) {
      const TensorInfo& t = graph.tensor(out);
      const bool hooked = target.input_embeddings_require_grad && out == graph.input_embeddings();
      const DType out_dtype = t.fixed_dtype.value_or(dtype);
      // Autograd never tracks integer tensors (indices, offsets).
      states_[out.value] = {out_dtype, (any_grad || hooked) && IsDifferentiable(out_dtype)};
    }
  }
}

DType TensorStates::OutputDType(const OpNode& op) const {
  const DTypeRuleInputs rule{op, states_, regime_, target_};
  return VisitOpKind(op.kind, [&]<OpKind K>() { return DTypeRule<K>::Output(rule); });
}

DType TensorStates::OptimizerStateDType(TensorId param) const {
  if (target_.torch_optim && !regime_.master_weights) return states_.at(param.value).stored_dtype;
  return regime_.optimizer_state_dtype;
}

DType TensorStates::UsedDType(const OpNode& op, size_t index) const {
  const DType d = states_.at(op.inputs[index].value).dtype;
  // transformers' grouped_mm path casts its input to the experts' dtype itself.
  if (op.kind == OpKind::kGroupedMm && index == 0) return states_.at(op.inputs[1].value).dtype;
  if (!regime_.autocast || !IsFloatingPoint(d)) return d;
  if (op.kind == OpKind::kAttnScores && index == 2) return d;  // the mask: added, not multiplied
  switch (AutocastOf(op.kind)) {
    case Autocast::kKeeps:
      return d;
    case Autocast::kLowers:
      return regime_.compute_dtype;
    case Autocast::kFp32:
      return DType::kF32;
    case Autocast::kFp32OnCuda:
      return target_.cuda_autocast ? DType::kF32 : d;
  }
  return d;
}

int64_t TensorStates::StoredBytes(const OpGraph& graph, TensorId id) const {
  const int64_t numel = graph.tensor(id).shape.Numel({});
  const DType d = states_.at(id.value).stored_dtype;
  return d == DType::kNF4 ? Nf4StorageBytes(numel) : StorageBytes(d, numel);
}

int64_t TensorStates::Bytes(const OpGraph& graph, TensorId id, const ShapeEnv& env) const {
  const int64_t numel = graph.tensor(id).shape.Numel(env);
  const DType d = states_.at(id.value).dtype;
  return d == DType::kNF4 ? Nf4StorageBytes(numel) : StorageBytes(d, numel);
}

}  // namespace headroom
