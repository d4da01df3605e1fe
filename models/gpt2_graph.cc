// GPT-2: learned positions, pre-LayerNorm blocks, fused qkv projection, tanh GELU,
// dropout on embeddings / attention probabilities / residual branches, tied LM head.
#include <fmt/format.h>

#include "models/build_graph.h"

namespace headroom {

void BuildGpt2Graph(const ModelSpec& spec, LayerBuilder& layers) {
  OpGraph& g = layers.graph();
  const int64_t h = spec.hidden_size, heads = spec.num_heads, d = spec.head_dim;
  TensorId ids = g.AddInput("input_ids", {Dim::B(), Dim::S()}, DType::kI64);
  g.MarkBatchInput(ids);  // labels: the same tensor in the loop (`labels=ids`)
  TensorId positions = g.AddInput("position_ids", {Dim::C(1), Dim::S()}, DType::kI64);
  TensorId labels = g.AddInput("labels", {Dim::B(), Dim::S()}, DType::kI64);

  TensorId wte = layers.Param("transformer.wte.weight", {Dim::C(spec.vocab_size), Dim::C(h)});
  TensorId wpe = layers.Param("transformer.wpe.weight", {Dim::C(spec.max_positions), Dim::C(h)});
  TensorId tok = layers.Embedding("transformer.wte", ids, wte, TokenShape(h));
  g.MarkInputEmbeddings(tok);
  TensorId pos =
      layers.Embedding("transformer.wpe", positions, wpe, {Dim::C(1), Dim::S(), Dim::C(h)});
  TensorId x = layers.Binary(OpKind::kAdd, "transformer.embed_add", tok, pos);
  x = layers.Dropout("transformer.drop", x, spec.hidden_dropout);

  TensorId mask = layers.CausalMaskIfEager(tok);
  layers.SetConv1dLinears(true);  // GPT2Attention's and GPT2MLP's projections
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const std::string p = fmt::format("transformer.h.{}", i);
    g.BeginBlock(x);
    TensorId n1 = layers.LayerNorm(p + ".ln_1", x, h);
    TensorId qkv = layers.Linear(p + ".attn.c_attn", "qkv", n1, h, 3 * h, true);
    auto qkv_heads =
        layers.SplitView(p + ".attn.split", qkv, {"q", "k", "v"}, HeadsShape(heads, d));
    TensorId attn =
        layers.Attention(p + ".attn", qkv_heads[0], qkv_heads[1], qkv_heads[2], mask, true);
    attn = layers.Linear(p + ".attn.c_proj", "o", attn, h, h, true);
    const TensorId attn_weights = layers.last_attention_weights();
    attn = layers.Dropout(p + ".attn.resid_dropout", attn, spec.hidden_dropout);
    const TensorId attn_output = attn, block_input = x;
    x = layers.Binary(OpKind::kAdd, p + ".attn_residual", x, attn);
    layers.HeldUntilModuleReturns(n1, x);  // GPT2Block rebinds hidden_states at the add
    TensorId n2 = layers.LayerNorm(p + ".ln_2", x, h);
    TensorId up = layers.Linear(p + ".mlp.c_fc", "up", n2, h, spec.intermediate_size, true);
    TensorId act = layers.Activation(p + ".mlp.act", up);
    TensorId down = layers.Linear(p + ".mlp.c_proj", "down", act, spec.intermediate_size, h, true);
    down = layers.Dropout(p + ".mlp.dropout", down, spec.hidden_dropout);
    x = layers.Binary(OpKind::kAdd, p + ".mlp_residual", x, down);
    layers.HeldUntilModuleReturns(n2, x);
    // GPT2Model's loop variable holds the block input, and GPT2Block's locals attn_output
    // and `_` (the attention weights) live until the block returns (modeling_gpt2.py:275-312).
    layers.HeldUntilModuleReturns(block_input, x);
    layers.HeldUntilModuleReturns(attn_output, x);
    if (attn_weights.valid()) layers.HeldUntilModuleReturns(attn_weights, x);
    g.EndBlock(x);
  }
  layers.SetConv1dLinears(false);  // the LM head is an nn.Linear
  x = layers.LayerNorm("transformer.ln_f", x, h);
  // GPT2Model.forward's inputs_embeds and position_embeds live until it returns.
  layers.HeldUntilModuleReturns(tok, x);
  layers.HeldUntilModuleReturns(pos, x);
  TensorId lm_weight = spec.tie_embeddings
                           ? wte
                           : layers.Param("lm_head.weight", {Dim::C(spec.vocab_size), Dim::C(h)});
  layers.LanguageModelLoss(x, lm_weight, labels);
}

}  // namespace headroom
