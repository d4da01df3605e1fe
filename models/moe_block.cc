// The sparse mixture-of-experts MLP as transformers 5.24 trains Qwen3-MoE and Mixtral:
// the router (softmax, top-k, renormalization) and the experts on transformers' default
// grouped_mm path (modeling_utils.py:1893-1894; integrations/moe.py:424-537). The pairs
// are sorted by expert, the tokens gathered per pair, two grouped products over all the
// experts' 3-D weights run on them, and the weighted rows are put back in token order
// and summed over each token's k experts. Every size is one row per token-expert pair,
// b * s * k, whatever the routing: grouped_mm neither drops nor pads.
#include <fmt/format.h>

#include "models/build_graph.h"

namespace headroom {
namespace {

// [b, s, k, n]: one row of n per token-expert pair.
SymShape PairRows(int64_t k, int64_t n) { return {Dim::B(), Dim::S(), Dim::C(k), Dim::C(n)}; }

TensorId AddOne(OpGraph& g, OpNode op, SymShape shape) {
  const std::string name = op.name;
  return g.AddOp(std::move(op), {{.name = name, .shape = std::move(shape)}})[0];
}

}  // namespace

TensorId SparseMoeBlock(LayerBuilder& layers, const std::string& p, TensorId x) {
  OpGraph& g = layers.graph();
  const ModelSpec& spec = layers.spec();
  const int64_t h = spec.hidden_size, experts = spec.num_experts, k = spec.num_experts_per_tok,
                width = spec.moe_intermediate_size;
  const bool mixtral = spec.family == ModelFamily::kMixtral;
  const SymShape pairs = {Dim::B(), Dim::S(), Dim::C(k)};

  // The router: logits = x @ W^T; Qwen3-MoE takes softmax(logits, dtype=float)
  // (modeling_qwen3_moe.py:250-268), Mixtral softmax(logits.float()) and keeps the fp32
  // weights (modeling_mixtral.py:106-111).
  TensorId router = layers.Param(p + ".gate.weight", {Dim::C(experts), Dim::C(h)});
  TensorId logits = AddOne(g, {.kind = OpKind::kLinear, .name = p + ".gate", .inputs = {x, router}},
                           TokenShape(experts));
  TensorId probs;
  if (mixtral) {
    TensorId f32 =
        AddOne(g, {.kind = OpKind::kCastF32, .name = p + ".gate.float", .inputs = {logits}},
               TokenShape(experts));
    probs = AddOne(g, {.kind = OpKind::kSoftmax, .name = p + ".gate.softmax", .inputs = {f32}},
                   TokenShape(experts));
  } else {
    probs = AddOne(
        g,
        {.kind = OpKind::kSoftmax, .name = p + ".gate.softmax", .inputs = {logits}, .upcast = true},
        TokenShape(experts));
  }
  const auto top =
      g.AddOp({.kind = OpKind::kTopK, .name = p + ".gate.topk", .inputs = {probs}},
              {{.name = p + ".gate.top_values", .shape = pairs},
               {.name = p + ".gate.top_indices", .shape = pairs, .fixed_dtype = DType::kI64}});
  TensorId weights = top[0];
  if (mixtral || spec.norm_topk_prob) {
    weights = AddOne(
        g, {.kind = OpKind::kRenormalize, .name = p + ".gate.renormalize", .inputs = {weights}},
        pairs);
  }
  if (!mixtral) {
    weights = AddOne(
        g, {.kind = OpKind::kCastLike, .name = p + ".gate.to", .inputs = {weights, logits}}, pairs);
  }

  // The experts (grouped_mm_experts_forward).
  const auto sorted = g.AddOp(
      {.kind = OpKind::kExpertSort, .name = p + ".experts.sort", .inputs = {top[1]}},
      {{.name = p + ".experts.sorted_ids", .shape = pairs, .fixed_dtype = DType::kI64},
       {.name = p + ".experts.perm", .shape = pairs, .fixed_dtype = DType::kI64},
       {.name = p + ".experts.offsets", .shape = {Dim::C(experts)}, .fixed_dtype = DType::kI32}});
  const TensorId perm = sorted[1], offsets = sorted[2];
  TensorId tokens = AddOne(g,
                           {.kind = OpKind::kGatherRows,
                            .name = p + ".experts.gather_tokens",
                            .inputs = {x, perm},
                            .row_divisor = k},
                           PairRows(k, h));
  // sample_weights[perm].unsqueeze(-1): a column per pair.
  TensorId pair_weights = AddOne(g,
                                 {.kind = OpKind::kGatherRows,
                                  .name = p + ".experts.gather_weights",
                                  .inputs = {weights, perm}},
                                 PairRows(k, 1));
  TensorId gate_up_w =
      layers.Param(p + ".experts.gate_up_proj", {Dim::C(experts), Dim::C(2 * width), Dim::C(h)});
  // grouped_mm of the pairs' rows against every expert's weights [E, out, in].
  auto grouped_mm = [&](const std::string& name, TensorId rows, TensorId experts_w, int64_t out) {
    return AddOne(g,
                  {.kind = OpKind::kGroupedMm, .name = name, .inputs = {rows, experts_w, offsets}},
                  PairRows(k, out));
  };
  TensorId gate_up = grouped_mm(p + ".experts.gate_up_proj", tokens, gate_up_w, 2 * width);
  // _default_apply_gate: gate, up = chunk(2); act(gate) * up (moe.py:568-579).
  const auto halves =
      layers.SplitView(p + ".experts.chunk", gate_up, {"gate", "up"}, PairRows(k, width));
  TensorId act = layers.Activation(p + ".experts.act", halves[0]);
  TensorId gated = layers.Binary(OpKind::kMul, p + ".experts.gate_mul", act, halves[1]);
  TensorId down_w =
      layers.Param(p + ".experts.down_proj", {Dim::C(experts), Dim::C(h), Dim::C(width)});
  TensorId down = grouped_mm(p + ".experts.down_proj", gated, down_w, h);
  TensorId weighted = layers.Binary(OpKind::kMul, p + ".experts.weighted", down, pair_weights);
  TensorId restored = AddOne(g,
                             {.kind = OpKind::kGatherRows,
                              .name = p + ".experts.restore_order",
                              .inputs = {weighted, perm},
                              .inverse_permutation = true},
                             PairRows(k, h));
  TensorId summed =
      AddOne(g, {.kind = OpKind::kSumTopK, .name = p + ".experts.sum", .inputs = {restored}},
             TokenShape(h));
  TensorId out =
      AddOne(g, {.kind = OpKind::kCastLike, .name = p + ".experts.to", .inputs = {summed, x}},
             TokenShape(h));

  // Python holds until the block returns: the router's logits (the block's `_`) and
  // routing weights, and the experts' sorted ids and gathered tokens (locals).
  for (TensorId held : {logits, weights, sorted[0], tokens})
    layers.HeldUntilModuleReturns(held, out);
  return out;
}

}  // namespace headroom
