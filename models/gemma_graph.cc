// Gemma 2 and Gemma 3 text (transformers' Gemma2ForCausalLM, Gemma3ForCausalLM): the
// Llama layer with embeddings scaled by sqrt(hidden), Gemma's RMSNorm ((1 + weight) in
// fp32) before and after both attention and MLP, a GeGLU MLP (gelu_pytorch_tanh),
// attention scaled by query_pre_attn_scalar, sliding-window layers between global ones,
// tied embeddings, and optional tanh soft-capping of the attention scores (Gemma 2,
// eager) and of the final logits. Gemma 3 adds per-head q/k norms and a second rotary
// table (rope_local_base_freq) for its sliding layers (modeling_gemma2.py:290-450,
// modeling_gemma3.py:300-550).
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "models/build_graph.h"

namespace headroom {
namespace {

using RopePair = std::array<TensorId, 2>;

// GemmaAttention.forward: projections viewed as heads (Gemma 3: normalized per head),
// rotary, attention, o_proj.
TensorId GemmaAttention(const ModelSpec& spec, LayerBuilder& layers, const std::string& p,
                        TensorId n1, const RopePair& rope, TensorId mask) {
  OpGraph& g = layers.graph();
  const int64_t h = spec.hidden_size, d = spec.head_dim;
  const std::string a = p + ".self_attn";
  auto heads_of = [&](const char* proj, const char* role, int64_t n, const char* norm) {
    TensorId t = layers.Linear(a + "." + proj, role, n1, h, n * d, false);
    t = layers.View(a + "." + role + "_heads", t, HeadsShape(n, d));
    if (norm && spec.has_qk_norm()) t = layers.GemmaRmsNorm(a + "." + norm, t, d);
    return t;
  };
  TensorId q = heads_of("q_proj", "q", spec.num_heads, "q_norm");
  TensorId k = heads_of("k_proj", "k", spec.num_kv_heads, "k_norm");
  TensorId v = heads_of("v_proj", "v", spec.num_kv_heads, nullptr);
  auto rotate = [&](const char* name, TensorId t, int64_t n) {
    return g.AddOp({.kind = OpKind::kRope, .name = a + name, .inputs = {t, rope[0], rope[1]}},
                   {{.name = a + name, .shape = HeadsShape(n, d)}})[0];
  };
  q = rotate(".rope_q", q, spec.num_heads);
  k = rotate(".rope_k", k, spec.num_kv_heads);
  TensorId attn = layers.Attention(a, q, k, v, mask, true);
  return layers.Linear(a + ".o_proj", "o", attn, spec.num_heads * d, h, false);
}

// GemmaMLP.forward: down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)).
TensorId GemmaMlp(const ModelSpec& spec, LayerBuilder& layers, const std::string& p, TensorId n2) {
  const int64_t h = spec.hidden_size, inner = spec.intermediate_size;
  TensorId gate = layers.Linear(p + ".mlp.gate_proj", "gate", n2, h, inner, false);
  TensorId up = layers.Linear(p + ".mlp.up_proj", "up", n2, h, inner, false);
  TensorId act = layers.Activation(p + ".mlp.act", gate);
  TensorId prod = layers.Binary(OpKind::kMul, p + ".mlp.gate_mul", act, up);
  return layers.Linear(p + ".mlp.down_proj", "down", prod, inner, h, false);
}

}  // namespace

void BuildGemmaGraph(const ModelSpec& spec, LayerBuilder& layers) {
  OpGraph& g = layers.graph();
  const int64_t h = spec.hidden_size;
  const auto [ids, labels] = layers.CausalLmBatch();

  // Gemma*TextScaledWordEmbedding: embedding(ids) * embed_scale, a 0-dim buffer
  // (register_buffer("embed_scale", torch.tensor(embed_scale), persistent=False)) in the
  // weights' dtype; its product is planned as a scale by a constant.
  TensorId embed = layers.Param("model.embed_tokens.weight", {Dim::C(spec.vocab_size), Dim::C(h)});
  if (layers.python_references()) g.AddWeightDtypeBuffer("model.embed_tokens.embed_scale", {});
  TensorId x = layers.Embedding("model.embed_tokens", ids, embed, TokenShape(h));
  x = layers.Scaled("model.embed_tokens.scale", x, std::sqrt(static_cast<double>(h)));
  g.MarkInputEmbeddings(x);
  const TensorId inputs_embeds = x;
  // Both masks up front, full then sliding (modeling_gemma2.py:421-434).
  const TensorId full_mask = layers.DecoderMask(x, 0);
  const TensorId sliding_mask =
      spec.sliding_window > 0 ? layers.DecoderMask(x, spec.sliding_window) : TensorId{};
  const RopePair global_rope = layers.RopeTables("model.rotary_emb", "rope", x, spec.rope);
  RopePair local_rope = global_rope;
  if (spec.rope_local_theta > 0)  // Gemma 3: one table per layer type
    local_rope = layers.RopeTables("model.rotary_emb_local", "rope_local", x,
                                   {.theta = spec.rope_local_theta});

  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}", i);
    const bool sliding = spec.is_sliding_layer(i);
    g.BeginBlock(x);
    const TensorId block_input = x;
    TensorId n1 = layers.GemmaRmsNorm(p + ".input_layernorm", x, h);
    TensorId attn = GemmaAttention(spec, layers, p, n1, sliding ? local_rope : global_rope,
                                   sliding ? sliding_mask : full_mask);
    const TensorId attn_weights = layers.last_attention_weights();
    layers.HeldUntilModuleReturns(n1, attn);
    TensorId post_attn = layers.GemmaRmsNorm(p + ".post_attention_layernorm", attn, h);
    layers.HeldUntilModuleReturns(attn, post_attn);
    x = layers.Binary(OpKind::kAdd, p + ".attn_residual", x, post_attn);
    TensorId n2 = layers.GemmaRmsNorm(p + ".pre_feedforward_layernorm", x, h);
    TensorId mlp = GemmaMlp(spec, layers, p, n2);
    layers.HeldUntilModuleReturns(n2, mlp);
    TensorId post_mlp = layers.GemmaRmsNorm(p + ".post_feedforward_layernorm", mlp, h);
    layers.HeldUntilModuleReturns(mlp, post_mlp);
    x = layers.Binary(OpKind::kAdd, p + ".mlp_residual", x, post_mlp);
    layers.EndDecoderLayer(block_input, attn_weights, x);
  }
  layers.CausalLmHead(layers.GemmaRmsNorm("model.norm", x, h), inputs_embeds, embed, labels);
}

}  // namespace headroom
