// Which attention kernel runs a model's attention for a request: transformers' eager
// code, the flash-attn package, or the backend PyTorch 2.15's scaled_dot_product_attention
// dispatcher picks (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp on CUDA,
// sdp_utils_cpp.cpp on the CPU) from the dtype, head size, mask, dropout, grouped K/V and
// the GPU's compute capability. The kernel sets what is saved for backward (op_cost.cc).
#pragma once

#include "models/layer.h"

#include <optional>
#include <string>

#include "models/model_spec.h"
#include "planner/core/attention_kernel.h"
#include "planner/core/dtype.h"
#include "planner/core/training_config.h"

namespace headroom {

// What the dispatcher sees at the attention call.
struct AttentionCall {
  AttentionImpl impl = AttentionImpl::kSdpa;
  KernelTarget device;
  DType dtype = DType::kF32;  // q, k, v as the kernel receives them (after autocast)
  // transformers' SDPA integration passes enable_gqa (no mask, head_dim <= 256); headroom's
  // runtime repeats K/V itself.
  bool python_stack = true;
  // An attn_mask tensor is passed: transformers passes none in training, but for packed
  // samples (MasksPackedSamples) or a window the sequence reaches.
  bool masked = false;
  bool training = true;  // inputs require grad: some kernels allow fewer head sizes then
  bool operator==(const AttentionCall&) const = default;
};

struct AttentionKernelChoice {
  AttentionKernel kernel = AttentionKernel::kEager;
  bool repeats_kv = false;  // grouped K/V are copied to every query head before the kernel
  std::string reason;       // one line for the report: why this kernel
};

AttentionKernelChoice ChooseAttentionKernel(const ModelSpec& model, const AttentionCall& call);
// The call a training config makes (dtype from its precision, the stack's conventions).
AttentionCall AttentionCallOf(const TrainingConfig& config);

// Whether SDPA's sliding-window layers take a bool mask: once the sequence reaches the
// window (masking_utils.py _ignore_causal_mask_sdpa: `kv_length >= local_attention_size`);
// shorter sequences run is_causal like the global layers.
bool SdpaTakesWindowMask(const ModelSpec& model, AttentionImpl impl, int64_t seq_len);
// The kernel those layers run, when they take the mask.
std::optional<AttentionKernelChoice> ChooseWindowAttentionKernel(const ModelSpec& model,
                                                                 const TrainingConfig& config);

}  // namespace headroom
