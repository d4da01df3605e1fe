#include "models/hf_config.h"

#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/python_json.h"
#include "planner/core/limits.h"

namespace headroom {
namespace {

using nlohmann::json;

// Reads config fields with errors that name the field and the file.
class FieldReader {
 public:
  FieldReader(const json& root, std::string_view origin) : root_(root), origin_(origin) {}

  Result<int64_t> Int(const char* key) const {
    if (!root_.contains(key) || root_[key].is_null()) {
      return MakeError(fmt::format("{}: missing field '{}'", origin_, key));
    }
    return IntegerOf(key);
  }
  Result<int64_t> IntOr(const char* key, int64_t fallback) const {
    if (!root_.contains(key) || root_[key].is_null()) return fallback;
    return IntegerOf(key);
  }
  double NumberOr(const char* key, double fallback) const {
    return root_.contains(key) && root_[key].is_number() ? root_[key].get<double>() : fallback;
  }
  std::string StringOr(const char* key, const char* fallback) const {
    return root_.contains(key) && root_[key].is_string() ? root_[key].get<std::string>() : fallback;
  }
  const json& root() const { return root_; }
  bool BoolOr(const char* key, bool fallback) const {
    return root_.contains(key) && root_[key].is_boolean() ? root_[key].get<bool>() : fallback;
  }

 private:
  // Integers that fit in 63 bits; a larger JSON integer is an error, not a wrapped value.
  Result<int64_t> IntegerOf(const char* key) const {
    const json& v = root_[key];
    if (!v.is_number_integer())
      return MakeError(fmt::format("{}: field '{}' must be an integer", origin_, key));
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})
      return MakeError(fmt::format("{}: field '{}' is too large ({})", origin_, key, v.dump()));
    return v.get<int64_t>();
  }

  const json& root_;
  std::string_view origin_;
};

#define HEADROOM_ASSIGN_OR_RETURN(target, expr) \
  do {                                          \
    auto _r = (expr);                           \
    if (!_r) return _r.error();                 \
    (target) = *_r;                             \
  } while (0)

// The experts of Qwen3MoeConfig (configuration_qwen3_moe.py:97-104) and MixtralConfig
// (configuration_mixtral.py:84-88), with their defaults. Both map num_experts onto
// num_local_experts (attribute_map), so either key names the count.
std::optional<Error> ImportExperts(const FieldReader& f, const std::string& type, ModelSpec& spec) {
  const bool mixtral = type == "mixtral";
  const json& root = f.root();
  const auto given = [&](const char* key) { return root.contains(key) && !root[key].is_null(); };
  if (given("num_experts") && given("num_local_experts") &&
      root["num_experts"] != root["num_local_experts"])
    return MakeError(fmt::format("{} config with num_experts {} and num_local_experts {}: which?",
                                 type, root["num_experts"].dump(),
                                 root["num_local_experts"].dump()));
  const char* experts_key = given("num_experts") ? "num_experts" : "num_local_experts";
  HEADROOM_ASSIGN_OR_RETURN(spec.num_experts, f.IntOr(experts_key, mixtral ? 8 : 128));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_experts_per_tok,
                            f.IntOr("num_experts_per_tok", mixtral ? 2 : 8));
  if (f.BoolOr("output_router_logits", false))
    return MakeError(
        fmt::format("{} config with output_router_logits=true is not supported (the auxiliary "
                    "load-balancing loss is not modelled)",
                    type));
  if (mixtral) {
    // MixtralExperts are intermediate_size wide (modeling_mixtral.py:64); MixtralTopKRouter
    // always renormalizes the top-k weights (modeling_mixtral.py:109). A sliding_window
    // is read as Phi-3's is: SDPA at sequences as long as the window is refused.
    spec.moe_intermediate_size = spec.intermediate_size;
    spec.norm_topk_prob = true;
    HEADROOM_ASSIGN_OR_RETURN(spec.sliding_window, f.IntOr("sliding_window", 0));
    if (const double jitter = f.NumberOr("router_jitter_noise", 0.0); jitter != 0.0)
      return MakeError(fmt::format(
          "mixtral config with router_jitter_noise={} is not supported (the training-time "
          "jitter on the router's input is not modelled)",
          jitter));
    return std::nullopt;
  }
  HEADROOM_ASSIGN_OR_RETURN(spec.moe_intermediate_size, f.IntOr("moe_intermediate_size", 768));
  spec.norm_topk_prob = f.BoolOr("norm_topk_prob", false);
  int64_t sparse_step = 1;
  HEADROOM_ASSIGN_OR_RETURN(sparse_step, f.IntOr("decoder_sparse_step", 1));
  if (sparse_step != 1)
    return MakeError(fmt::format(
        "qwen3_moe config with decoder_sparse_step={} is not supported (only 1: every layer "
        "a mixture of experts; dense MLP layers among the sparse ones are not modelled)",
        sparse_step));
  if (given("mlp_only_layers") &&
      (!root["mlp_only_layers"].is_array() || !root["mlp_only_layers"].empty()))
    return MakeError(fmt::format(
        "qwen3_moe config with mlp_only_layers {} is not supported (dense MLP layers among "
        "the sparse ones are not modelled)",
        root["mlp_only_layers"].dump()));
  return std::nullopt;
}

Result<ModelSpec> ImportLlamaLike(const FieldReader& f, const std::string& type, ModelSpec spec) {
  spec.family = type == "qwen3"       ? ModelFamily::kQwen3
                : type == "qwen3_moe" ? ModelFamily::kQwen3Moe
                : type == "mixtral"   ? ModelFamily::kMixtral
                : type == "phi3"      ? ModelFamily::kPhi3
                                      : ModelFamily::kLlama;
  HEADROOM_ASSIGN_OR_RETURN(spec.vocab_size, f.Int("vocab_size"));
  HEADROOM_ASSIGN_OR_RETURN(spec.hidden_size, f.Int("hidden_size"));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_layers, f.Int("num_hidden_layers"));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_heads, f.Int("num_attention_heads"));
  HEADROOM_ASSIGN_OR_RETURN(spec.intermediate_size, f.Int("intermediate_size"));
  HEADROOM_ASSIGN_OR_RETURN(spec.max_positions, f.Int("max_position_embeddings"));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_kv_heads, f.IntOr("num_key_value_heads", spec.num_heads));
  // Qwen3Config defaults head_dim to 128 (configuration_qwen3.py:67), not hidden / heads.
  // Qwen3MoeConfig has no head_dim field: without one, the attention takes hidden / heads
  // (modeling_qwen3_moe.py:129), as Llama's does.
  HEADROOM_ASSIGN_OR_RETURN(spec.head_dim, f.IntOr("head_dim", type == "qwen3" ? 128 : 0));
  spec.tie_embeddings = f.BoolOr("tie_word_embeddings", false);
  // MixtralConfig: rms_norm_eps 1e-5 and rope_theta 1e6 (default_theta) by default.
  spec.norm_eps = f.NumberOr("rms_norm_eps", type == "mixtral" ? 1e-5 : 1e-6);
  spec.attention_dropout = f.NumberOr("attention_dropout", 0.0);
  spec.activation = f.StringOr("hidden_act", "silu");
  // transformers 4.x writes rope_theta and rope_scaling; 5.x may write rope_parameters.
  const json& root = f.root();
  const json* rope = root.contains("rope_parameters") && root["rope_parameters"].is_object()
                         ? &root["rope_parameters"]
                         : nullptr;
  spec.rope.theta = rope && rope->contains("rope_theta") && (*rope)["rope_theta"].is_number()
                        ? (*rope)["rope_theta"].get<double>()
                        : f.NumberOr("rope_theta", type == "mixtral" ? 1e6 : 10000.0);
  const json* scaling = root.contains("rope_scaling") && root["rope_scaling"].is_object()
                            ? &root["rope_scaling"]
                            : rope;
  if (scaling) {
    auto text = [&](const char* key) {
      return scaling->contains(key) && (*scaling)[key].is_string()
                 ? (*scaling)[key].get<std::string>()
                 : std::string();
    };
    auto number = [&](const char* key, double fallback) {
      return scaling->contains(key) && (*scaling)[key].is_number() ? (*scaling)[key].get<double>()
                                                                   : fallback;
    };
    const std::string kind = !text("rope_type").empty() ? text("rope_type") : text("type");
    if (kind == "llama3") {
      spec.rope.llama3_factor = number("factor", 8.0);
      spec.rope.low_freq_factor = number("low_freq_factor", 1.0);
      spec.rope.high_freq_factor = number("high_freq_factor", 4.0);
      const double original = number("original_max_position_embeddings", 8192);
      if (!(original >= 1 && original <= static_cast<double>(limits::kMaxPositions)))
        return MakeError(
            fmt::format("rope_scaling original_max_position_embeddings {} is out of "
                        "range (1 to {})",
                        original, limits::kMaxPositions));
      spec.rope.original_max_positions = static_cast<int64_t>(original);
    } else if (!kind.empty() && kind != "default") {
      return MakeError(
          fmt::format("rope_scaling type '{}' is not supported (default, llama3)", kind));
    }
  }
  // Qwen2 always has q/k/v biases; Qwen3 has them when attention_bias (default false),
  // and then on o_proj too (modeling_qwen3.py), which is not modelled.
  spec.qkv_bias = type == "qwen2";
  const bool qwen3 = type == "qwen3" || type == "qwen3_moe";
  if (qwen3 && f.BoolOr("attention_bias", false))
    return MakeError(fmt::format("{} config with attention_bias=true is not supported", type));
  if (qwen3 && f.BoolOr("use_sliding_window", false))
    return MakeError(
        fmt::format("{} config with use_sliding_window=true is not supported (every released Qwen3 "
                    "attends globally)",
                    type));
  if (type == "qwen3_moe" || type == "mixtral") {
    if (auto error = ImportExperts(f, type, spec)) return *error;
  }
  if (type == "mistral") {
    // Every Mistral layer attends within sliding_window when it is set (modeling_mistral.py:355;
    // MistralConfig defaults it to 4096, configuration_mistral.py:79; v0.2 and later write null).
    const bool null_window =
        f.root().contains("sliding_window") && f.root()["sliding_window"].is_null();
    HEADROOM_ASSIGN_OR_RETURN(spec.sliding_window,
                              null_window ? Result<int64_t>(0) : f.IntOr("sliding_window", 4096));
  }
  if (type == "phi3") {
    // Phi3Config: no head_dim field (hidden / heads), residual dropout resid_pdrop.
    spec.hidden_dropout = f.NumberOr("resid_pdrop", 0.0);
    HEADROOM_ASSIGN_OR_RETURN(spec.sliding_window, f.IntOr("sliding_window", 0));
    if (f.NumberOr("partial_rotary_factor", 1.0) != 1.0)
      return MakeError("phi3 config with partial_rotary_factor other than 1 is not supported");
  }
  if (type == "llama" && f.BoolOr("attention_bias", false)) {
    return MakeError(
        "llama config with attention_bias=true (bias on the output projection) is not supported");
  }
  if (f.BoolOr("mlp_bias", false))
    return MakeError("llama config with mlp_bias=true is not supported");
  return spec;
}

// Gemma2Config and Gemma3TextConfig (configuration_gemma2.py:67-97,
// configuration_gemma3.py:73-159), with their defaults where a field is absent or null.
Result<ModelSpec> ImportGemma(const FieldReader& f, const std::string& type, ModelSpec spec) {
  const bool gemma2 = type == "gemma2";
  spec.family = gemma2 ? ModelFamily::kGemma2 : ModelFamily::kGemma3;
  HEADROOM_ASSIGN_OR_RETURN(spec.vocab_size, f.IntOr("vocab_size", gemma2 ? 256000 : 262208));
  HEADROOM_ASSIGN_OR_RETURN(spec.hidden_size, f.Int("hidden_size"));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_layers, f.Int("num_hidden_layers"));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_heads, f.IntOr("num_attention_heads", 8));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_kv_heads, f.IntOr("num_key_value_heads", 4));
  HEADROOM_ASSIGN_OR_RETURN(spec.head_dim, f.IntOr("head_dim", 256));
  HEADROOM_ASSIGN_OR_RETURN(spec.intermediate_size, f.Int("intermediate_size"));
  HEADROOM_ASSIGN_OR_RETURN(spec.max_positions,
                            f.IntOr("max_position_embeddings", gemma2 ? 8192 : 131072));
  HEADROOM_ASSIGN_OR_RETURN(spec.sliding_window, f.IntOr("sliding_window", 4096));
  HEADROOM_ASSIGN_OR_RETURN(spec.sliding_window_pattern,
                            f.IntOr("sliding_window_pattern", gemma2 ? 2 : 6));
  spec.tie_embeddings = f.BoolOr("tie_word_embeddings", true);
  spec.norm_eps = f.NumberOr("rms_norm_eps", 1e-6);
  spec.attention_dropout = f.NumberOr("attention_dropout", 0.0);
  spec.activation = f.StringOr("hidden_activation", "gelu_pytorch_tanh");
  spec.query_pre_attn_scalar = f.NumberOr("query_pre_attn_scalar", 256);
  // null softcaps are off; Gemma 2 defaults to 50 and 30, Gemma 3 to none, and Gemma 3
  // never passes the attention cap to its attention (modeling_gemma3.py:342-352).
  auto cap = [&](const char* key, double fallback) {
    const bool null = f.root().contains(key) && f.root()[key].is_null();
    return null ? 0.0 : f.NumberOr(key, fallback);
  };
  spec.final_logit_softcap = cap("final_logit_softcapping", gemma2 ? 30.0 : 0.0);
  if (gemma2) spec.attn_logit_softcap = cap("attn_logit_softcapping", 50.0);
  spec.rope.theta = f.NumberOr("rope_theta", gemma2 ? 10000.0 : 1e6);
  if (!gemma2) spec.rope_local_theta = f.NumberOr("rope_local_base_freq", 10000.0);
  const nlohmann::json& root = f.root();
  if (root.contains("rope_scaling") && root["rope_scaling"].is_object()) {
    const nlohmann::json& s = root["rope_scaling"];
    const std::string kind = s.value("rope_type", s.value("type", std::string()));
    if (kind != "linear" || !s.contains("factor") || !s["factor"].is_number())
      return MakeError(fmt::format("{} rope_scaling '{}' is not supported (linear)", type, kind));
    spec.rope.linear_factor = s["factor"].get<double>();
  }
  if (root.contains("layer_types") && root["layer_types"].is_array()) {
    // Only the periodic pattern both configs default to; an explicit list must match it.
    const nlohmann::json& types = root["layer_types"];
    for (size_t i = 0; i < types.size(); ++i) {
      const bool sliding = types[i] == "sliding_attention";
      const bool expected = spec.sliding_window_pattern <= 0 ||
                            (static_cast<int64_t>(i) + 1) % spec.sliding_window_pattern != 0;
      if (sliding != expected)
        return MakeError(
            fmt::format("{} layer_types other than one full layer every {} is not supported", type,
                        spec.sliding_window_pattern));
    }
  }
  if (f.BoolOr("attention_bias", false))
    return MakeError(fmt::format("{} config with attention_bias=true is not supported", type));
  if (f.BoolOr("use_bidirectional_attention", false))
    return MakeError("gemma3 config with use_bidirectional_attention=true is not supported");
  return spec;
}

Result<ModelSpec> ImportGpt2(const FieldReader& f, ModelSpec spec) {
  spec.family = ModelFamily::kGpt2;
  HEADROOM_ASSIGN_OR_RETURN(spec.vocab_size, f.Int("vocab_size"));
  HEADROOM_ASSIGN_OR_RETURN(spec.hidden_size, f.Int("n_embd"));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_layers, f.Int("n_layer"));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_heads, f.Int("n_head"));
  HEADROOM_ASSIGN_OR_RETURN(spec.max_positions, f.Int("n_positions"));
  // Unset: Validate derives 4 x n_embd once n_embd is known to be within bounds.
  HEADROOM_ASSIGN_OR_RETURN(spec.intermediate_size, f.IntOr("n_inner", 0));
  spec.tie_embeddings = f.BoolOr("tie_word_embeddings", true);
  spec.norm_eps = f.NumberOr("layer_norm_epsilon", 1e-5);
  spec.hidden_dropout = f.NumberOr("resid_pdrop", 0.1);
  spec.attention_dropout = f.NumberOr("attn_pdrop", 0.1);
  spec.activation = f.StringOr("activation_function", "gelu_new");
  return spec;
}

Result<ModelSpec> ImportBert(const FieldReader& f, const json& root, ModelSpec spec) {
  spec.family = ModelFamily::kBert;
  HEADROOM_ASSIGN_OR_RETURN(spec.vocab_size, f.Int("vocab_size"));
  HEADROOM_ASSIGN_OR_RETURN(spec.hidden_size, f.Int("hidden_size"));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_layers, f.Int("num_hidden_layers"));
  HEADROOM_ASSIGN_OR_RETURN(spec.num_heads, f.Int("num_attention_heads"));
  HEADROOM_ASSIGN_OR_RETURN(spec.intermediate_size, f.Int("intermediate_size"));
  HEADROOM_ASSIGN_OR_RETURN(spec.max_positions, f.Int("max_position_embeddings"));
  HEADROOM_ASSIGN_OR_RETURN(spec.type_vocab_size, f.IntOr("type_vocab_size", 2));
  spec.norm_eps = f.NumberOr("layer_norm_eps", 1e-12);
  spec.hidden_dropout = f.NumberOr("hidden_dropout_prob", 0.1);
  spec.attention_dropout = f.NumberOr("attention_probs_dropout_prob", 0.1);
  spec.activation = f.StringOr("hidden_act", "gelu");
  if (root.contains("id2label") && root["id2label"].is_object())
    spec.num_labels = static_cast<int64_t>(root["id2label"].size());
  else
    HEADROOM_ASSIGN_OR_RETURN(spec.num_labels, f.IntOr("num_labels", 2));
  return spec;
}

}  // namespace

Result<ModelSpec> ParseHfConfigJson(std::string_view json_text, std::string_view origin) {
  json root;
  try {
    root = ParsePythonJson(json_text);  // as transformers writes it: Infinity, NaN
  } catch (const json::parse_error& e) {
    return MakeError(
        fmt::format("{}: malformed JSON at byte {}: not a valid config.json", origin, e.byte));
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    return MakeError(fmt::format("{}: not a valid config.json ({})", origin, e.what()));
  }
  if (!root.is_object())
    return MakeError(fmt::format("{}: config.json must be a JSON object", origin));
  if (!root.contains("model_type") || !root["model_type"].is_string()) {
    return MakeError(fmt::format("{}: missing field 'model_type'", origin));
  }
  const std::string type = root["model_type"].get<std::string>();
  FieldReader reader(root, origin);
  ModelSpec spec;
  spec.name = root.contains("_name_or_path") && root["_name_or_path"].is_string() &&
                      !root["_name_or_path"].get<std::string>().empty()
                  ? root["_name_or_path"].get<std::string>()
                  : std::string(origin);
  Result<ModelSpec> imported = MakeError("");
  if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
      type == "phi3" || type == "qwen3_moe" || type == "mixtral") {
    imported = ImportLlamaLike(reader, type, spec);
  } else if (type == "gemma2" || type == "gemma3_text") {
    imported = ImportGemma(reader, type, spec);
  } else if (type == "gpt2") {
    imported = ImportGpt2(reader, spec);
  } else if (type == "bert") {
    imported = ImportBert(reader, root, spec);
  } else {
    return MakeError(fmt::format(
        "{}: model_type '{}' is not supported (supported: llama, mistral, qwen2, qwen3, phi3, "
        "gemma2, gemma3_text, qwen3_moe, mixtral, gpt2, bert)",
        origin, type));
  }
  if (!imported) return imported.error();
  return Validate(std::move(imported).value());
}

}  // namespace headroom
