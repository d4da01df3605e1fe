// BERT encoder for sequence classification: word + position + token-type embeddings,
// post-LayerNorm blocks with bidirectional attention, erf GELU, a tanh pooler over the
// first token and a linear classifier trained with cross-entropy.
#include <fmt/format.h>

#include "models/build_graph.h"

namespace headroom {

void BuildBertGraph(const ModelSpec& spec, LayerBuilder& layers) {
  OpGraph& g = layers.graph();
  const int64_t h = spec.hidden_size, heads = spec.num_heads, d = spec.head_dim;
  TensorId ids = g.AddInput("input_ids", {Dim::B(), Dim::S()}, DType::kI64);
  g.MarkBatchInput(ids);
  TensorId types, positions;
  if (layers.python_references()) {
    // BertEmbeddings registers position_ids and token_type_ids as int64 [1, max_positions]
    // buffers (modeling_bert.py:66-67) and reads slices of them: views, no allocation.
    const SymShape buffer{Dim::C(1), Dim::C(spec.max_positions)};
    const TensorId type_buffer = g.AddBuffer("bert.embeddings.token_type_ids", buffer, DType::kI64);
    const TensorId position_buffer =
        g.AddBuffer("bert.embeddings.position_ids", buffer, DType::kI64);
    types = layers.View("bert.embeddings.token_type_slice", type_buffer, {Dim::B(), Dim::S()});
    positions =
        layers.View("bert.embeddings.position_slice", position_buffer, {Dim::C(1), Dim::S()});
  } else {
    types = g.AddInput("token_type_ids", {Dim::B(), Dim::S()}, DType::kI64);
    positions = g.AddInput("position_ids", {Dim::C(1), Dim::S()}, DType::kI64);
  }
  TensorId labels = g.AddInput("labels", {Dim::B()}, DType::kI64);
  g.MarkBatchInput(labels);  // the class labels: a tensor of their own in the batch

  const std::string e = "bert.embeddings";
  TensorId word_w =
      layers.Param(e + ".word_embeddings.weight", {Dim::C(spec.vocab_size), Dim::C(h)});
  TensorId pos_w =
      layers.Param(e + ".position_embeddings.weight", {Dim::C(spec.max_positions), Dim::C(h)});
  TensorId type_w =
      layers.Param(e + ".token_type_embeddings.weight", {Dim::C(spec.type_vocab_size), Dim::C(h)});
  TensorId word = layers.Embedding(e + ".word_embeddings", ids, word_w, TokenShape(h));
  g.MarkInputEmbeddings(word);
  TensorId type = layers.Embedding(e + ".token_type_embeddings", types, type_w, TokenShape(h));
  TensorId x = layers.Binary(OpKind::kAdd, e + ".add_types", word, type);
  TensorId pos = layers.Embedding(e + ".position_embeddings", positions, pos_w,
                                  {Dim::C(1), Dim::S(), Dim::C(h)});
  x = layers.Binary(OpKind::kAdd, e + ".add_positions", x, pos);
  x = layers.LayerNorm(e + ".LayerNorm", x, h);
  x = layers.Dropout(e + ".dropout", x, spec.hidden_dropout);
  const TensorId embedding_output = x;

  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const std::string p = fmt::format("bert.encoder.layer.{}", i);
    g.BeginBlock(x);
    TensorId q = layers.Linear(p + ".attention.self.query", "q", x, h, h, true);
    TensorId k = layers.Linear(p + ".attention.self.key", "k", x, h, h, true);
    TensorId v = layers.Linear(p + ".attention.self.value", "v", x, h, h, true);
    q = layers.View(p + ".attention.self.q_heads", q, HeadsShape(heads, d));
    k = layers.View(p + ".attention.self.k_heads", k, HeadsShape(heads, d));
    v = layers.View(p + ".attention.self.v_heads", v, HeadsShape(heads, d));
    TensorId attn = layers.Attention(p + ".attention.self", q, k, v, TensorId{}, false);
    const TensorId attn_weights = layers.last_attention_weights();
    attn = layers.Linear(p + ".attention.output.dense", "o", attn, h, h, true);
    attn = layers.Dropout(p + ".attention.output.dropout", attn, spec.hidden_dropout);
    const TensorId attn_dropped = attn;
    attn = layers.Binary(OpKind::kAdd, p + ".attention.output.residual", attn, x);
    TensorId h1 = layers.LayerNorm(p + ".attention.output.LayerNorm", attn, h);
    // BertSelfOutput/BertOutput: LayerNorm(hidden_states + input_tensor) keeps the dropout
    // output bound to hidden_states until the norm returns.
    layers.HeldUntilModuleReturns(attn_dropped, h1);
    TensorId up =
        layers.Linear(p + ".intermediate.dense", "up", h1, h, spec.intermediate_size, true);
    TensorId act = layers.Activation(p + ".intermediate.act", up);
    TensorId down =
        layers.Linear(p + ".output.dense", "down", act, spec.intermediate_size, h, true);
    down = layers.Dropout(p + ".output.dropout", down, spec.hidden_dropout);
    const TensorId down_dropped = down;
    down = layers.Binary(OpKind::kAdd, p + ".output.residual", down, h1);
    const TensorId block_input = x;
    x = layers.LayerNorm(p + ".output.LayerNorm", down, h);
    layers.HeldUntilModuleReturns(down_dropped, x);
    // BertLayer.feed_forward_chunk's intermediate_output lives until BertOutput returns
    // (modeling_bert.py:417-418), even where output.dense saves nothing (LoRA).
    layers.HeldUntilModuleReturns(act, x);
    // BertEncoder's loop variable holds the block input, and BertLayer its
    // attention_output, until the layer returns (modeling_bert.py:411-418, 439-440).
    layers.HeldUntilModuleReturns(block_input, x);
    layers.HeldUntilModuleReturns(h1, x);
    if (attn_weights.valid()) layers.HeldUntilModuleReturns(attn_weights, x);  // BertLayer's `_`
    g.EndBlock(x);
  }
  TensorId first = layers.View("bert.pooler.first_token", x, {Dim::B(), Dim::C(h)});
  TensorId pooled = layers.Linear("bert.pooler.dense", "pooler", first, h, h, true, false, true);
  pooled = layers.Unary(OpKind::kTanh, "bert.pooler.activation", pooled);
  // BertModel.forward's embedding_output lives until it returns (modeling_bert.py:657).
  layers.HeldUntilModuleReturns(embedding_output, pooled);
  layers.HoldAsModelOutput(x);
  layers.HoldAsModelOutput(pooled);
  pooled = layers.Dropout("dropout", pooled, spec.hidden_dropout);
  // PEFT keeps the classifier trainable for sequence classification.
  TensorId cls_w = layers.Param("classifier.weight", {Dim::C(spec.num_labels), Dim::C(h)}, true);
  TensorId cls_b = layers.Param("classifier.bias", {Dim::C(spec.num_labels)}, true);
  TensorId logits =
      g.AddOp({.kind = OpKind::kLinear, .name = "classifier", .inputs = {pooled, cls_w, cls_b}},
              {{.name = "logits", .shape = {Dim::B(), Dim::C(spec.num_labels)}}})[0];
  layers.HoldAsModelOutput(logits);
  layers.ClassificationLoss(logits, labels, spec.num_labels);
}

}  // namespace headroom
