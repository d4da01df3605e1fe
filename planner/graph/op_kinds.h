// The op table: every op kind, declared once, with its printed name and its compute
// class. Each interpreter defines one rule per kind by specializing a class template
// (the cost rules in planner/simulate/op_cost.cc and internal/, the dtype rules in
// planner/simulate/tensor_states.cc, the kernels in runtime/op_kernels.cc) and dispatches
// with VisitOpKind, which names every kind in this list: a kind without a rule is an
// incomplete type there, so a new kind that misses a rule fails to compile.
#pragma once

#include "planner/graph/layer.h"

#include <cstdlib>

namespace headroom {

// What an op computes, for the time model and the kernels' scratch.
enum class OpClass {
  kMatmul,       // a matrix product (oneDNN/cuBLAS); autocast lowers it
  kAttention,    // a fused attention kernel
  kElementwise,  // elementwise arithmetic, normalizations, losses: memory-bound
  kLayout,       // views and reshapes: no arithmetic
  kConstant,     // tables built once per forward, outside autograd
};

//  X(enum name, printed name, class)  what it computes
#define HEADROOM_OP_KINDS(X)                                                                       \
  X(Embedding, "embedding", kElementwise)  /* (ids, weight) -> rows of weight */                   \
  X(Linear, "linear", kMatmul)             /* (x, weight[, bias]) -> x @ weight^T + bias */        \
  X(LayerNorm, "layer_norm", kElementwise) /* (x, weight, bias) */                                 \
  X(RmsNorm, "rms_norm", kElementwise)     /* (x, weight): HF's fp32 upcast, pow, mean, ... */     \
  X(GemmaRmsNorm, "gemma_rms_norm", kElementwise) /* (x, weight): fp32 x * rstd * (1 + w), cast */ \
  X(Add, "add", kElementwise)                     /* (a, b) -> a + b */                            \
  X(Mul, "mul", kElementwise)                     /* (a, b) -> a * b, both activations */          \
  X(Scale, "scale", kElementwise)                 /* (x) -> x * scalar (LoRA scaling) */           \
  X(Gelu, "gelu", kElementwise)                   /* erf GELU */                                   \
  X(GeluTanh, "gelu_tanh", kElementwise)          /* tanh-approximated GELU, one fused op */       \
  X(Silu, "silu", kElementwise)                   /* */                                            \
  X(Tanh, "tanh", kElementwise)                   /* */                                            \
  X(Contiguous, "contiguous", kElementwise)       /* a contiguous copy of a strided view */        \
  X(CastLike, "cast_like", kElementwise)          /* (x, like) -> x.to(like.dtype) */              \
  X(Cube, "cube", kElementwise)                   /* torch.pow(x, 3.0) (gelu_new's arithmetic) */  \
  X(AddScalar, "add_scalar", kElementwise)        /* (x) -> x + scalar */                          \
  X(KvCacheCopy, "kv_cache_copy", kElementwise)   /* DynamicCache's cat([empty, kv]) */            \
  X(Dropout, "dropout", kElementwise)             /* (x) -> x * mask / (1 - p) */                  \
  X(RopeTables, "rope_tables", kConstant)         /* () -> cos, sin [1, s, head_dim] */            \
  X(Rope, "rope", kElementwise)                   /* (x, cos, sin) -> rotated x */                 \
  X(CausalMask, "causal_mask", kConstant)         /* () -> additive mask [b, 1, s, s] (eager) */   \
  X(WindowMask, "window_mask", kConstant)         /* () -> bool [1, 1, s, s] (SDPA window) */      \
  X(View, "view", kLayout)                   /* reshape, transpose, split, select: no bytes */     \
  X(RepeatKv, "repeat_kv", kElementwise)     /* kv repeated to all query heads (one head: view) */ \
  X(MergeHeads, "merge_heads", kElementwise) /* [b, a, s, d] -> [b, s, a*d] */                     \
  X(AttnScores, "attn_scores", kMatmul)      /* (q, k[, mask]) -> q @ k^T * scale + mask */        \
  X(Softmax, "softmax", kElementwise)        /* (scores) -> probabilities */                       \
  X(AttnContext, "attn_context", kMatmul)    /* (probs, v) -> probs @ v */                         \
  X(Sdpa, "sdpa", kAttention)                /* (q, k, v[, bool mask]): the fused kernel */        \
  X(CastF32, "cast_f32", kElementwise)       /* x.float(); an alias when x is fp32 */              \
  X(LogSoftmax, "log_softmax", kElementwise) /* (logits fp32) -> log-probabilities */              \
  X(NllLoss, "nll_loss", kElementwise)       /* (log_probs, labels) -> scalar loss */          \
  X(ChunkedNll, "chunked_nll", kMatmul) /* (hidden, lm weight, labels) -> loss: TRL's tiles */ \
  X(TopK, "topk", kElementwise)              /* (probs) -> top-k values, indices (int64) */     \
  X(Renormalize, "renormalize", kElementwise) /* (v) -> v /= v.sum(-1, keepdim), in place */    \
  X(ExpertSort, "expert_sort", kElementwise) /* (indices) -> perm, offsets, sorted ids (int) */ \
  X(GatherRows, "gather_rows", kElementwise) /* (x, perm) -> x[perm // k] (or x[perm^-1]) */    \
  X(GroupedMm, "grouped_mm", kMatmul)        /* (x, w [E, out, in], offsets) -> x @ w[e]^T */   \
  X(SumTopK, "sum_top_k", kElementwise)      /* [.., k, n] -> [.., n]: sum over the experts */ \
  X(Traced, "traced", kElementwise) /* an imported ATen op: its class and costs in OpNode::traced */

enum class OpKind {
#define HEADROOM_OP_ENUM(name, text, op_class) k##name,
  HEADROOM_OP_KINDS(HEADROOM_OP_ENUM)
#undef HEADROOM_OP_ENUM
};

constexpr const char* OpKindName(OpKind kind) {
  switch (kind) {
#define HEADROOM_OP_NAME(name, text, op_class) \
  case OpKind::k##name:                        \
    return text;
    HEADROOM_OP_KINDS(HEADROOM_OP_NAME)
#undef HEADROOM_OP_NAME
  }
  return "?";
}

constexpr OpClass OpClassOf(OpKind kind) {
  switch (kind) {
#define HEADROOM_OP_CLASS(name, text, op_class) \
  case OpKind::k##name:                         \
    return OpClass::op_class;
    HEADROOM_OP_KINDS(HEADROOM_OP_CLASS)
#undef HEADROOM_OP_CLASS
  }
  return OpClass::kElementwise;
}

// Calls `visit.template operator()<OpKind::kX>()` for the kind at hand, e.g.
//   VisitOpKind(op.kind, [&]<OpKind K>() { return CostRule<K>::Forward(rule); });
// Every kind in the table is instantiated, so each must have its rule.
template <typename Visitor>
decltype(auto) VisitOpKind(OpKind kind, Visitor&& visit) {
  switch (kind) {
#define HEADROOM_OP_VISIT(name, text, op_class) \
  case OpKind::k##name:                         \
    return visit.template operator()<OpKind::k##name>();
    HEADROOM_OP_KINDS(HEADROOM_OP_VISIT)
#undef HEADROOM_OP_VISIT
  }
  std::abort();  // not an OpKind
}

}  // namespace headroom
