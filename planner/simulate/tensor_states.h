// Resolves, for one precision regime, each tensor's dtype and whether it requires grad
// — the facts every per-op cost rule reads.
#pragma once

#include "planner/simulate/layer.h"

#include <optional>
#include <vector>

#include "planner/core/dtype.h"
#include "planner/core/training_config.h"
#include "planner/graph/op_graph.h"

namespace headroom {

struct TensorState {
  DType dtype = DType::kF32;  // as the ops see it (a parameter: as gathered)
  bool requires_grad = false;
  // A parameter's storage: its dtype, but under an FSDP2 MixedPrecisionPolicy the
  // dtype of the shard it is gathered from (the optimizer's and the sharded gradient's).
  DType stored_dtype = DType::kF32;
};

// What the device's kernels and the stack's recipe change in the cost rules.
struct CostTarget {
  std::optional<DType> frozen_dtype;  // unset: the regime's
  // CUDA's native_dropout and headroom's own dropout save a bool mask; ATen's CPU
  // dropout (_dropout_impl) saves its noise tensor in the input's dtype.
  bool dropout_bool_mask = true;
  // A bf16 matrix multiply on the CPU: the scratch of oneDNN's kernel (none on CUDA).
  std::optional<CpuBf16> cpu_bf16_matmul;
  int cpu_threads = 1;  // the threads oneDNN books a scratchpad for
  // transformers' GPT-2 Conv1D stores its weight [in, out]; headroom's runtime runs every
  // linear as F.linear.
  bool conv1d_weights = false;
  // CUDA's autocast runs layer_norm and softmax in fp32; the CPU's runs them in the
  // input's dtype (its fp32 list has the losses, not these).
  bool cuda_autocast = true;
  // PEFT (autocast_adapter_dtype=True) keeps LoRA adapters in fp32 whatever the base's
  // dtype; headroom's runtime stores them in the regime's.
  bool fp32_adapters = false;
  // LibTorch-style checkpointing (headroom's runtime) re-runs a whole block and holds its
  // output and output gradient through the block's backward; torch.utils.checkpoint with
  // use_reentrant=False (transformers) stops early and holds neither.
  bool reentrant_checkpoint = true;
  // torch.optim creates every parameter's states (and a 0-d step tensor each) before
  // updating any; LibTorch's optimizers create each parameter's just before updating it.
  bool torch_optim = false;
  // Where torch.optim's step tensors live: on the parameter's device for the fused (or
  // capturable) Adam/AdamW, on the host otherwise (torch/optim/adam.py _init_group:
  // `torch.tensor(0.0, dtype=_get_scalar_dtype(), device="cpu")`), which is device memory
  // only when the device is the CPU.
  bool cuda_device = false;
  bool StepTensorOnDevice(OptimizerImpl impl) const {
    return torch_optim && (!cuda_device || impl == OptimizerImpl::kFused);
  }
  // transformers' gradient_checkpointing_enable() calls enable_input_require_grads(): a
  // forward hook makes the input embedding's output require grad. With a frozen
  // embedding (LoRA) that output is a leaf, which autograd holds, with its .grad, until
  // the graph is freed.
  bool input_embeddings_require_grad = false;
  // Checkpointing stashes the RNG state per checkpointed block (torch.utils.checkpoint's
  // preserve_rng_state, headroom's replayed dropout) and takes another copy for each
  // recomputation: a host tensor, device memory only when the device is the CPU.
  int64_t checkpoint_rng_state_bytes = 0;
  // FSDP2's MixedPrecisionPolicy param_dtype: every floating-point parameter of another
  // dtype is cast to it before the all-gather (_fsdp_collectives.py
  // _get_param_all_gather_inputs), so the units compute with it.
  std::optional<DType> gathered_dtype;
  std::optional<DType> fsdp_reduce_dtype;  // its reduce_dtype; unset: the shards' dtype
};
CostTarget CostTargetOf(const TrainingConfig& config);

class TensorStates {
 public:
  TensorStates(const OpGraph& graph, const PrecisionRegime& regime, const CostTarget& target = {});

  const TensorState& operator[](TensorId id) const { return states_.at(id.value); }
  const PrecisionRegime& regime() const { return regime_; }
  const CostTarget& target() const { return target_; }
  // Storage bytes of a tensor at (b, s); parameters stored as NF4 include their
  // quantization statistics.
  int64_t Bytes(const OpGraph& graph, TensorId id, const ShapeEnv& env) const;
  // A parameter's bytes as stored (its shard's dtype under an FSDP2 policy).
  int64_t StoredBytes(const OpGraph& graph, TensorId id) const;
  // The dtype of a trainable parameter's optimizer states. torch.optim makes them with
  // zeros_like(param): the parameter's own dtype (fp32 for PEFT's adapters in a bf16
  // model); otherwise the regime's.
  DType OptimizerStateDType(TensorId param) const;
  // The dtype input `index` of `op` is used in after autocast's casts.
  DType UsedDType(const OpNode& op, size_t index) const;
  // True when input `index` of `op` is cast to another dtype before use.
  bool IsCast(const OpNode& op, size_t index) const {
    return UsedDType(op, index) != states_.at(op.inputs[index].value).dtype;
  }

 private:
  DType OutputDType(const OpNode& op) const;

  PrecisionRegime regime_;
  CostTarget target_;
  std::vector<TensorState> states_;
};

// NF4 with double quantization (QLoRA) as bitsandbytes stores one weight: 4 bits per
// weight, one 8-bit absmax per 64 weights, one fp32 absmax per 256 of those blocks, and
// the QuantState's own tensors: the NF4 code (16 fp32), the absmax's 8-bit code (256 fp32)
// and its offset (an fp32 scalar) (`Params4bit` / `QuantState`, bitsandbytes
// nn/modules.py, functional.py; measured on tiny Llama: 1,088 + 4 bytes per linear).
int64_t Nf4StorageBytes(int64_t numel);
// Its blocks of 64 weights, each with one absmax (bitsandbytes' default blocksize).
int64_t Nf4Blocks(int64_t numel);

}  // namespace headroom
