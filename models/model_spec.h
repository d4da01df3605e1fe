// ModelSpec: the architecture facts the graph builders need: GPT-2 style decoders,
// LLaMA style decoders (Llama 2/3, Mistral, Qwen2, Qwen3 with its per-head q/k norms,
// Phi-3 with its fused projections, Gemma 2/3, and the mixtures of experts Qwen3-MoE and
// Mixtral) and BERT encoders.
#pragma once

#include "models/layer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "planner/core/enum_table.h"
#include "planner/core/result.h"
#include "planner/graph/op_graph.h"

namespace headroom {

enum class ModelFamily {
  kGpt2,
  kLlama,
  kBert,
  kQwen3,
  kPhi3,
  kGemma2,
  kGemma3,
  kQwen3Moe,
  kMixtral,
  kImported,  // no builder: the graph recorded from the model's own code (model_import.h)
};

inline constexpr EnumName<ModelFamily> kFamilyNames[] = {
    {ModelFamily::kGpt2, "gpt2"},       {ModelFamily::kLlama, "llama"},
    {ModelFamily::kBert, "bert"},       {ModelFamily::kQwen3, "qwen3"},
    {ModelFamily::kPhi3, "phi3"},       {ModelFamily::kGemma2, "gemma2"},
    {ModelFamily::kGemma3, "gemma3"},   {ModelFamily::kQwen3Moe, "qwen3_moe"},
    {ModelFamily::kMixtral, "mixtral"}, {ModelFamily::kImported, "imported"}};
inline std::string_view FamilyName(ModelFamily family) { return NameIn(kFamilyNames, family); }

// Decoders in transformers' Llama mould: RMSNorm, rotary embeddings, grouped-query
// attention, a gated MLP, softmax in fp32 cast back to the query's dtype.
inline bool IsLlamaLike(ModelFamily family) {
  return family == ModelFamily::kLlama || family == ModelFamily::kQwen3 ||
         family == ModelFamily::kPhi3 || family == ModelFamily::kGemma2 ||
         family == ModelFamily::kGemma3 || family == ModelFamily::kQwen3Moe ||
         family == ModelFamily::kMixtral;
}
inline bool IsGemma(ModelFamily family) {
  return family == ModelFamily::kGemma2 || family == ModelFamily::kGemma3;
}

class ImportedModel;

struct ModelSpec {
  std::string name;
  ModelFamily family = ModelFamily::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;       // < num_heads: grouped-query attention (LLaMA family)
  int64_t head_dim = 0;           // defaults to hidden_size / num_heads
  int64_t intermediate_size = 0;  // MLP width (GPT-2: 4 * hidden by default)
  int64_t max_positions = 0;      // longest sequence the model supports
  // Attention within this many tokens (config.json sliding_window); 0: global. Phi-3:
  // every layer; Gemma: the layers sliding_window_pattern says.
  int64_t sliding_window = 0;
  // Gemma: every n-th layer attends globally, the others within the window (Gemma 2: 2,
  // Gemma 3: 6; layer i slides when (i + 1) % n != 0).
  int64_t sliding_window_pattern = 0;
  // Gemma: attention scale 1 / sqrt(query_pre_attn_scalar) (0: 1 / sqrt(head_dim)), tanh
  // soft-capping of the attention scores and of the final logits (0: none).
  double query_pre_attn_scalar = 0.0;
  double attn_logit_softcap = 0.0;
  double final_logit_softcap = 0.0;
  double rope_local_theta = 0.0;  // Gemma 3: rotary base of the sliding layers
  bool tie_embeddings = false;    // LM head shares the token embedding
  bool qkv_bias = false;          // LLaMA family: biases on q/k/v (Qwen2)
  double norm_eps = 1e-5;
  double hidden_dropout = 0.0;     // residual / embedding / MLP dropout probability
  double attention_dropout = 0.0;  // dropout on attention probabilities
  int64_t type_vocab_size = 0;     // BERT token types
  int64_t num_labels = 0;          // BERT classification head outputs
  // The MLP activation by its transformers name: gelu_new (GPT-2's NewGELUActivation,
  // Python arithmetic), gelu (erf), gelu_pytorch_tanh (one fused kernel), silu.
  // Empty: the family's default.
  std::string activation;
  RopeParams rope;  // LLaMA family: rope_theta and rope_scaling
  // Mixture of experts (qwen3_moe, mixtral): every layer's MLP is `num_experts` gated MLPs
  // of width `moe_intermediate_size`, each token routed to `num_experts_per_tok` of them;
  // `norm_topk_prob`: the chosen routing weights are renormalized to sum to 1.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  // kImported: its graphs, and the model_type they were imported for.
  std::shared_ptr<const ImportedModel> imported;
  std::string model_type;

  bool operator==(const ModelSpec&) const = default;
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t q_dim() const { return num_heads * head_dim; }
  // Qwen3 normalizes q and k per head (Qwen3RMSNorm over head_dim) before rotary.
  bool has_qk_norm() const {
    return family == ModelFamily::kQwen3 || family == ModelFamily::kGemma3 ||
           family == ModelFamily::kQwen3Moe;
  }
  bool is_moe() const { return num_experts > 0; }
  bool is_sliding_layer(int64_t layer) const {
    if (sliding_window <= 0) return false;
    return sliding_window_pattern <= 0 || (layer + 1) % sliding_window_pattern != 0;
  }
};

// Fills defaults (head_dim, num_kv_heads, intermediate_size) and checks that sizes are
// positive and consistent; the error names the field.
Result<ModelSpec> Validate(ModelSpec spec);

// Parses the YAML spec format documented in docs/model-spec.md.
Result<ModelSpec> ParseModelSpecYaml(std::string_view yaml_text, std::string_view origin);

}  // namespace headroom
