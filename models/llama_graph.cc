// LLaMA family (Llama 2/3, Mistral, Qwen2, Qwen3, Qwen3-MoE, Mixtral): RMSNorm, rotary
// embeddings, grouped-query attention, SwiGLU MLP (or a mixture of experts), no dropout,
// optional qkv bias, tied or untied LM head; Qwen3 adds RMSNorms over each head of q and k.
#include <fmt/format.h>

#include "models/build_graph.h"

namespace headroom {

void BuildLlamaGraph(const ModelSpec& spec, LayerBuilder& layers) {
  OpGraph& g = layers.graph();
  const int64_t h = spec.hidden_size, heads = spec.num_heads, kv = spec.num_kv_heads,
                d = spec.head_dim;
  const auto [ids, labels] = layers.CausalLmBatch();

  TensorId embed = layers.Param("model.embed_tokens.weight", {Dim::C(spec.vocab_size), Dim::C(h)});
  TensorId x = layers.Embedding("model.embed_tokens", ids, embed, TokenShape(h));
  g.MarkInputEmbeddings(x);
  const TensorId inputs_embeds = x;
  // HF computes cos/sin once per forward in the hidden states' dtype, from position ids
  // of shape [1, s] (cache_position.unsqueeze(0)): one table for the whole batch.
  const auto tables = layers.RopeTables("model.rotary_emb", "rope", x, spec.rope);
  // Mistral and Mixtral configs may set a window for every layer (0: causal).
  TensorId mask = layers.DecoderMask(x, spec.sliding_window);

  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}", i);
    g.BeginBlock(x);
    TensorId n1 = layers.RmsNorm(p + ".input_layernorm", x, h);
    // Qwen3 normalizes each projection per head as it is made, before the next one
    // (modeling_qwen3.py:245-247): q_norm(q_proj(x).view(..)), then k, then v.
    auto heads_of = [&](const char* proj, const char* role, int64_t n, const char* norm) {
      const std::string name = p + ".self_attn." + proj;
      TensorId t = layers.Linear(name, role, n1, h, n * d, spec.qkv_bias);
      t = layers.View(p + ".self_attn." + role + "_heads", t, HeadsShape(n, d));
      if (norm && spec.has_qk_norm()) t = layers.RmsNorm(p + ".self_attn." + norm, t, d);
      return t;
    };
    TensorId q = heads_of("q_proj", "q", heads, "q_norm");
    TensorId k = heads_of("k_proj", "k", kv, "k_norm");
    TensorId v = heads_of("v_proj", "v", kv, nullptr);
    q = g.AddOp({.kind = OpKind::kRope,
                 .name = p + ".self_attn.rope_q",
                 .inputs = {q, tables[0], tables[1]}},
                {{.name = p + ".self_attn.rope_q", .shape = HeadsShape(heads, d)}})[0];
    k = g.AddOp({.kind = OpKind::kRope,
                 .name = p + ".self_attn.rope_k",
                 .inputs = {k, tables[0], tables[1]}},
                {{.name = p + ".self_attn.rope_k", .shape = HeadsShape(kv, d)}})[0];
    TensorId attn = layers.Attention(p + ".self_attn", q, k, v, mask, true);
    const TensorId attn_weights = layers.last_attention_weights();
    attn = layers.Linear(p + ".self_attn.o_proj", "o", attn, heads * d, h, false);
    layers.HeldUntilModuleReturns(n1, attn);
    TensorId block_input = x;
    x = layers.Binary(OpKind::kAdd, p + ".attn_residual", x, attn);
    TensorId n2 = layers.RmsNorm(p + ".post_attention_layernorm", x, h);
    TensorId down;
    if (spec.is_moe()) {
      down = SparseMoeBlock(layers, p + ".mlp", n2);
    } else {
      TensorId gate =
          layers.Linear(p + ".mlp.gate_proj", "gate", n2, h, spec.intermediate_size, false);
      TensorId up = layers.Linear(p + ".mlp.up_proj", "up", n2, h, spec.intermediate_size, false);
      TensorId act = layers.Activation(p + ".mlp.act", gate);
      TensorId prod = layers.Binary(OpKind::kMul, p + ".mlp.gate_mul", act, up);
      down = layers.Linear(p + ".mlp.down_proj", "down", prod, spec.intermediate_size, h, false);
    }
    layers.HeldUntilModuleReturns(n2, down);
    x = layers.Binary(OpKind::kAdd, p + ".mlp_residual", x, down);
    layers.EndDecoderLayer(block_input, attn_weights, x);
  }
  layers.CausalLmHead(layers.RmsNorm("model.norm", x, h), inputs_embeds, embed, labels);
}

}  // namespace headroom
