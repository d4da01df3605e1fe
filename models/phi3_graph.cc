// Phi-3 / Phi-4 (transformers' Phi3ForCausalLM): the Llama layer with fused projections.
// q, k and v are slices of one qkv_proj output, and gate and up the two chunks of one
// gate_up_proj output (modeling_phi3.py:49-64, 203-227); untied LM head, no embedding
// dropout (embd_pdrop is never read), residual dropout resid_pdrop.
#include <array>

#include <fmt/format.h>

#include "models/build_graph.h"

namespace headroom {
namespace {

// Phi3Attention.forward: qkv = qkv_proj(x); q, k, v = slices viewed as heads; rotary;
// attention; o_proj. The local `qkv` holds the fused output until the module returns.
TensorId Phi3Attention(const ModelSpec& spec, LayerBuilder& layers, const std::string& p,
                       TensorId n1, const std::array<TensorId, 2>& rope, TensorId mask) {
  OpGraph& g = layers.graph();
  const int64_t h = spec.hidden_size, heads = spec.num_heads, kv = spec.num_kv_heads,
                d = spec.head_dim;
  const std::string a = p + ".self_attn";
  TensorId qkv = layers.Linear(a + ".qkv_proj", "qkv", n1, h, (heads + 2 * kv) * d, false);
  TensorId q = layers.HeadsSlice(a + ".q_heads", qkv, 0, heads, d);
  TensorId k = layers.HeadsSlice(a + ".k_heads", qkv, heads * d, kv, d);
  TensorId v = layers.HeadsSlice(a + ".v_heads", qkv, (heads + kv) * d, kv, d);
  // apply_rotary_pos_emb ends in torch.cat([rotated, pass]) (partial_rotary_factor 1: the
  // pass part is empty): a new tensor, as kRope's output is.
  auto rotate = [&](const char* name, TensorId t, int64_t n) {
    return g.AddOp({.kind = OpKind::kRope, .name = a + name, .inputs = {t, rope[0], rope[1]}},
                   {{.name = a + name, .shape = HeadsShape(n, d)}})[0];
  };
  q = rotate(".rope_q", q, heads);
  k = rotate(".rope_k", k, kv);
  // transformers' rotary is contiguous (the cat); headroom's kRope keeps q's layout.
  TensorId attn = layers.Attention(a, q, k, v, mask, true, layers.python_references());
  TensorId out = layers.Linear(a + ".o_proj", "o", attn, heads * d, h, false);
  layers.HeldUntilModuleReturns(qkv, out);
  layers.HeldUntilModuleReturns(n1, out);
  return out;
}

// Phi3MLP.forward: gate, up = gate_up_proj(x).chunk(2); down_proj(up * silu(gate)).
TensorId Phi3Mlp(const ModelSpec& spec, LayerBuilder& layers, const std::string& p, TensorId n2) {
  const int64_t h = spec.hidden_size, inner = spec.intermediate_size;
  TensorId gate_up = layers.Linear(p + ".mlp.gate_up_proj", "gate_up", n2, h, 2 * inner, false);
  std::vector<TensorId> parts =
      layers.SplitView(p + ".mlp.chunk", gate_up, {"gate", "up"}, TokenShape(inner));
  TensorId act = layers.Activation(p + ".mlp.act", parts[0]);
  TensorId prod = layers.Binary(OpKind::kMul, p + ".mlp.up_mul", parts[1], act);
  TensorId down = layers.Linear(p + ".mlp.down_proj", "down", prod, inner, h, false);
  layers.HeldUntilModuleReturns(gate_up, down);  // the local `gate` view
  layers.HeldUntilModuleReturns(n2, down);
  return down;
}

}  // namespace

void BuildPhi3Graph(const ModelSpec& spec, LayerBuilder& layers) {
  OpGraph& g = layers.graph();
  const int64_t h = spec.hidden_size;
  const auto [ids, labels] = layers.CausalLmBatch();

  TensorId embed = layers.Param("model.embed_tokens.weight", {Dim::C(spec.vocab_size), Dim::C(h)});
  TensorId x = layers.Embedding("model.embed_tokens", ids, embed, TokenShape(h));
  g.MarkInputEmbeddings(x);
  const TensorId inputs_embeds = x;
  const auto tables = layers.RopeTables("model.rotary_emb", "rope", x, spec.rope);
  // Phi3Model's mask is a sliding-window one when the config has a window.
  TensorId mask = layers.DecoderMask(x, spec.sliding_window);

  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}", i);
    g.BeginBlock(x);
    const TensorId block_input = x;
    TensorId n1 = layers.RmsNorm(p + ".input_layernorm", x, h);
    TensorId attn = Phi3Attention(spec, layers, p, n1, {tables[0], tables[1]}, mask);
    const TensorId attn_weights = layers.last_attention_weights();
    attn = layers.Dropout(p + ".resid_attn_dropout", attn, spec.hidden_dropout);
    x = layers.Binary(OpKind::kAdd, p + ".attn_residual", x, attn);
    TensorId n2 = layers.RmsNorm(p + ".post_attention_layernorm", x, h);
    TensorId mlp = Phi3Mlp(spec, layers, p, n2);
    mlp = layers.Dropout(p + ".resid_mlp_dropout", mlp, spec.hidden_dropout);
    x = layers.Binary(OpKind::kAdd, p + ".mlp_residual", x, mlp);
    layers.EndDecoderLayer(block_input, attn_weights, x);  // `self_attn_weights`
  }
  layers.CausalLmHead(layers.RmsNorm("model.norm", x, h), inputs_embeds, embed, labels);
}

}  // namespace headroom
