// The cost rules of the mixture-of-experts op kinds (planner/graph/op_kinds.h), included
// by op_cost.cc beside the others.
#pragma once

#include "planner/simulate/internal/layer.h"

#include "planner/simulate/internal/cost_rule_parts.h"

namespace headroom::cost_rules {

// The router (modeling_qwen3_moe.py:250-268, modeling_mixtral.py:104-111) and
// grouped_mm_experts_forward (integrations/moe.py:424-537), the experts implementation
// transformers 5.24 picks by default (modeling_utils.py:1893-1894). Every size is one
// row per token-expert pair, whatever the routing.

// torch.topk: values in the input's dtype and int64 indices. TopkBackward0 saves the
// indices and scatters the values' gradient into zeros of the input's size
// (derivatives.yaml: value_selecting_reduction_backward).
template <>
struct CostRule<OpKind::kTopK> : NewGradients, FlopsOfClass {
  static void Forward(ForwardRule& r) { r.SaveOutputIf(1, true); }
};

// router_top_value /= router_top_value.sum(dim=-1, keepdim=True), in place. DivBackward0
// saves the divisor and, for the divisor's gradient, the dividend, which an in-place
// division keeps as a clone of the values before it (measured: div_ > clone).
template <>
struct CostRule<OpKind::kRenormalize> : FlopsOfClass {
  static void Forward(ForwardRule& r) {
    r.cost.output_aliases_input = true;
    const int64_t n = r.v.in_numel(0), rows = n / r.v.last_dim(0);
    const DType d = r.v.states[r.v.in(0)].dtype;
    r.Internal("renormalize sum", StorageBytes(d, rows), r.SavedOr(true));
    if (r.record) r.Internal("renormalize values before /=", StorageBytes(d, n), Lifetime::kSaved);
  }
  // The quotient's and the divisor's gradient terms (div, div, neg, mul) at the values'
  // size.
  static void Backward(BackwardRule& r) {
    r.cost.workspace_bytes = 3 * r.v.states.Bytes(r.v.graph, r.v.in(0), r.v.env);
  }
};

// torch.sort of the pairs' expert ids (values and permutation, int64, with an int64
// scratch), then histc over a float copy of the ids on the CPU (an int32 one on CUDA,
// moe.py:448) and a cumsum into int32 offsets. No gradient.
template <>
struct CostRule<OpKind::kExpertSort> : NewGradients, FlopsOfClass {
  static void Forward(ForwardRule& r) {
    const int64_t pairs = r.v.in_numel(0);
    // CostTarget::cuda_autocast is set for CUDA kernels: the device.
    const DType histc_in = r.v.states.target().cuda_autocast ? DType::kI32 : DType::kF32;
    r.Internal("histc input", StorageBytes(histc_in, pairs), Lifetime::kTransient);
    const int64_t experts = r.v.numel(r.v.op.outputs.at(2));
    for (const char* label : {"histc counts", "cumsum"})
      r.cost.internals.push_back({.label = label,
                                  .bytes = StorageBytes(DType::kF32, experts),
                                  .lifetime = Lifetime::kTransient,
                                  .per_sample = false});
    r.cost.workspace_bytes = StorageBytes(DType::kI64, pairs);  // sort's scratch
  }
};

// x[index]: rows of input 0 at the positions input 1 gives, divided by row_divisor
// (hidden_states[perm // top_k]) or inverted (weighted_out[inv_perm], with inv_perm built
// by empty_like and an arange scattered into it). IndexBackward0 saves the index and
// builds the gradient as zeros of input 0's size with index_put_(accumulate), which first
// copies a gradient that arrives as an expanded view (the sum over the k experts').
template <>
struct CostRule<OpKind::kGatherRows> : FlopsOfClass {
  static void Forward(ForwardRule& r) {
    const int64_t pairs = r.v.in_numel(1);
    const bool saved = r.v.grad(0);
    if (r.v.op.inverse_permutation) {
      r.Internal("inverse permutation", StorageBytes(DType::kI64, pairs), r.SavedOr(saved));
      r.Internal("arange", StorageBytes(DType::kI64, pairs), Lifetime::kEphemeral);
    } else if (r.v.op.row_divisor > 0) {
      r.Internal("perm // top_k", StorageBytes(DType::kI64, pairs), r.SavedOr(saved));
    } else {
      r.SaveIf(1, saved);
    }
  }
  static void Backward(BackwardRule& r) {
    for (OpId consumer : r.v.graph.Consumers(r.v.op.outputs.at(0))) {
      if (r.v.graph.op(consumer).kind == OpKind::kSumTopK) r.cost.workspace_bytes = r.v.out_bytes();
    }
  }
};

// grouped_mm(x.to(w.dtype), w.transpose(-2, -1), offs) over every expert's weights
// (moe.py:373-383): autocast leaves it alone; the explicit cast is TensorStates::UsedDType's.
// derivatives.yaml: _grouped_mm saves x for the weights' gradient, the weights for x's,
// and the offsets; both gradients are new tensors of the full sizes.
template <>
struct CostRule<OpKind::kGroupedMm> : NewGradients {
  static void Forward(ForwardRule& r) {
    SavesOperandsForEachOther::Forward(r);
    r.SaveIf(2, true);
  }
  static OpFlops Flops(const OpView& v) {
    const double mm = 2.0 * static_cast<double>(v.out_numel()) * static_cast<double>(v.last_dim(0));
    return {mm, (v.grad(0) ? mm : 0.0) + (v.grad(1) ? mm : 0.0)};
  }
};

// view(tokens, top_k, h).sum(dim=1): SumBackward1 expands the gradient (no copy).
template <>
struct CostRule<OpKind::kSumTopK> : SavesNothing, FlopsOfClass {
  static void Backward(BackwardRule& r) { r.PassThroughIf(0, r.same_dtype_as_out(0)); }
};

}  // namespace headroom::cost_rules
