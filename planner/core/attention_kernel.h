// The attention kernel that actually runs a model's attention: what eager code does, or
// which of PyTorch's scaled_dot_product_attention backends its dispatcher picks, or the
// flash-attn package. Each saves different tensors for backward (docs/memory-model.md).
#pragma once

#include <string_view>

#include "planner/core/enum_table.h"

namespace headroom {

enum class AttentionKernel {
  kEager,         // transformers' eager attention: matmul, softmax, matmul in Python
  kFlash,         // SDPA's flash kernel (CUDA, 16-bit, no mask)
  kCudnn,         // SDPA's cuDNN kernel (CUDA, 16-bit; tried first on sm90 and sm10x)
  kMemEfficient,  // SDPA's memory-efficient kernel (CUDA; fp32 too, masks, grouped K/V)
  kMath,          // SDPA's math fallback: the whole attention matrix, composite ops
  kCpuFlash,      // SDPA's CPU flash kernel (_scaled_dot_product_flash_attention_for_cpu)
  kFlashAttn2,    // the flash-attn package (attn_implementation="flash_attention_2")
};
inline constexpr EnumName<AttentionKernel> kAttentionKernelNames[] = {
    {AttentionKernel::kEager, "eager"},
    {AttentionKernel::kFlash, "flash"},
    {AttentionKernel::kCudnn, "cudnn"},
    {AttentionKernel::kMemEfficient, "memory-efficient"},
    {AttentionKernel::kMath, "math"},
    {AttentionKernel::kCpuFlash, "flash-cpu"},
    {AttentionKernel::kFlashAttn2, "flash-attn-2"}};
inline std::string_view AttentionKernelName(AttentionKernel k) {
  return NameIn(kAttentionKernelNames, k);
}

// Kernels that return [b, heads, s, d] as a transpose of a [b, s, heads, d] buffer, so
// transformers' transpose(1, 2).contiguous() after attention is a view.
inline bool ReturnsHeadsLastLayout(AttentionKernel k) {
  return k == AttentionKernel::kFlash || k == AttentionKernel::kCudnn ||
         k == AttentionKernel::kMemEfficient || k == AttentionKernel::kCpuFlash ||
         k == AttentionKernel::kFlashAttn2;
}

}  // namespace headroom
