// The cost rule of imported ops (OpKind::kTraced, docs/graph-file.md), included by
// op_cost.cc beside the others: what `headroom import` recorded, instead of a rule derived
// from the op's maths.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <stdexcept>

#include "planner/simulate/internal/attention_shapes.h"
#include "planner/simulate/internal/cost_rule_parts.h"

namespace headroom::cost_rules {

template <>
struct CostRule<OpKind::kTraced> {
  static const TracedOp& Of(const OpView& v) {
    if (!v.op.traced) throw std::logic_error("traced op " + v.op.name + " carries no record");
    return *v.op.traced;
  }

  // The recorded saves hold only when autograd records the op: in grad mode, with an
  // output that requires grad (a checkpointed block's first forward saves nothing).
  static void Forward(ForwardRule& r) {
    const TracedOp& t = Of(r.v);
    r.cost.output_aliases_input = t.aliases_input;
    for (size_t i = 0; i < r.v.op.inputs.size(); ++i) r.SaveIf(i, t.saves_input.at(i));
    for (size_t o = 0; o < r.v.op.outputs.size() && o < 32; ++o)
      r.SaveOutputIf(o, (t.saved_outputs >> o) & 1u);
    if (!r.record) return;
    // Storages only autograd keeps: they exist because it saved them.
    for (const SymSize& extra : t.saved_extra) {
      for (const bool per_sample : {true, false}) {
        const int64_t bytes = (per_sample ? extra.PerSample() : extra.Fixed()).Bytes(r.v.env);
        if (bytes > 0)
          r.cost.internals.push_back({.label = "traced saved storage",
                                      .bytes = bytes,
                                      .lifetime = Lifetime::kSaved,
                                      .per_sample = per_sample});
      }
    }
  }

  static void Backward(BackwardRule& r) {
    const TracedOp& t = Of(r.v);
    for (size_t i = 0; i < r.v.op.inputs.size(); ++i) {
      if (!r.v.grad(i)) continue;  // kNone already
      switch (t.grads.at(i)) {
        case TracedGrad::kNone:
          r.cost.input_grads[i] = GradFlow::kNone;
          break;
        case TracedGrad::kNew:
          r.cost.input_grads[i] = GradFlow::kNew;
          break;
        case TracedGrad::kPass:
          r.cost.input_grads[i] = GradFlow::kPassThrough;
          break;
      }
    }
    // The part that grows with the micro-batch is scaled by the simulator; the rest not.
    // A fused CUDA attention kernel's own scratch is invisible to the fake tensors the
    // recording ran on: added by the rule the built graph's sdpa op uses.
    r.cost.workspace_bytes = t.backward_workspace.PerSample().Bytes(r.v.env);
    if (t.attention) {
      const AttentionHeads& h = *t.attention;
      const SdpaShape shape{r.v.env.micro_batch, h.heads,    h.kv_heads,
                            r.v.env.seq_len,     h.head_dim, r.v.states.UsedDType(r.v.op, 0)};
      r.cost.workspace_bytes += FusedAttentionBackwardScratch(KernelOf(t.aten), shape);
    }
    r.cost.workspace_fixed_bytes = t.backward_workspace.Fixed().Bytes(r.v.env);
  }

  // The fused CUDA attention kernel an imported op ran (fake_cuda_semantics.py routes
  // scaled_dot_product_attention to it as the dispatcher would); kMath, whose scratch
  // the recording holds, for any other op (cuDNN's own workspace is not modelled).
  static AttentionKernel KernelOf(std::string_view aten) {
    if (aten == "_scaled_dot_product_flash_attention") return AttentionKernel::kFlash;
    if (aten == "_scaled_dot_product_efficient_attention") return AttentionKernel::kMemEfficient;
    return AttentionKernel::kMath;
  }

  static OpFlops Flops(const OpView& v) {
    const TracedOp& t = Of(v);
    return {t.flops_forward.Evaluate(v.env), v.out_grad() ? t.flops_backward.Evaluate(v.env) : 0.0};
  }
};

}  // namespace headroom::cost_rules
