// The shapes of one scaled_dot_product_attention call and the scratch its fused CUDA
// backward kernels allocate inside their ATen op: shared by the built graph's sdpa rule
// and the rule of imported ops (traced_cost_rule.h), whose fake-tensor recording cannot
// see a kernel's internal buffers.
#pragma once

#include "planner/simulate/internal/layer.h"

#include "planner/simulate/internal/cost_rule_parts.h"

namespace headroom::cost_rules {

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

struct SdpaShape {
  int64_t b, heads, kv_heads, s, d;
  DType dtype;  // q, k, v as the kernel receives them

  // q and k as [b, heads, s, d] (the ATen ops' layout).
  static SdpaShape Of(const OpView& v) {
    const auto& q = v.graph.tensor(v.in(0)).shape.dims();
    const auto& k = v.graph.tensor(v.in(1)).shape.dims();
    return {SizeIn(q.at(0), v.env), q.at(1).value,  k.at(1).value,
            SizeIn(q.at(2), v.env), q.back().value, v.states.UsedDType(v.op, 0)};
  }
  int64_t q_numel() const { return b * heads * s * d; }
  int64_t scores_numel() const { return b * heads * s * s; }
  bool grouped() const { return kv_heads != heads; }
};

// Bytes a fused CUDA attention backward allocates besides its gradients (docs/memory-model.md):
// - flash (PyTorch's and flash-attn's mha_bwd): dq_accum fp32 [b, round128(s), h, d rounded
//   to 32 (64 past 128)] and softmax_d fp32 [b, h, round128(s)];
// - memory-efficient: gQ's fp32 staging (split keys);
// - cuDNN: none modelled (dq/dk/dv are empty_like(q/k/v); cuDNN sizes its own workspace);
// and, under grouped K/V, dK/dV at every query head before the sum over each group.
inline int64_t FusedAttentionBackwardScratch(AttentionKernel kernel, const SdpaShape& a) {
  const int64_t expanded_kv = a.grouped() ? 2 * StorageBytes(a.dtype, a.q_numel()) : 0;
  switch (kernel) {
    case AttentionKernel::kFlash:
    case AttentionKernel::kFlashAttn2: {
      const int64_t s128 = RoundUp(a.s, 128);
      const int64_t d_round = RoundUp(a.d, a.d <= 128 ? 32 : 64);
      return StorageBytes(DType::kF32, a.b * s128 * a.heads * d_round) +
             StorageBytes(DType::kF32, a.b * a.heads * s128) + expanded_kv;
    }
    case AttentionKernel::kMemEfficient:
      return StorageBytes(DType::kF32, a.q_numel()) + expanded_kv;
    default:
      return 0;
  }
}

}  // namespace headroom::cost_rules
