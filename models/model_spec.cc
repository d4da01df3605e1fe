#include "models/model_spec.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "planner/core/limits.h"

namespace headroom {
namespace {

// Each size within limits.h's bounds (after the positivity checks), so the defaults
// derived from them and every shape stay far from overflow.
std::optional<Error> CheckBounds(const ModelSpec& spec) {
  using namespace limits;
  for (auto [v, hi, field] :
       {std::tuple{spec.num_layers, kMaxLayers, "num_layers"},
        {spec.vocab_size, kMaxVocab, "vocab_size"},
        {spec.hidden_size, kMaxWidth, "hidden_size"},
        {spec.num_heads, kMaxHeads, "num_heads"},
        {spec.num_kv_heads, kMaxHeads, "num_kv_heads"},
        {spec.head_dim, kMaxWidth, "head_dim"},
        {spec.intermediate_size, kMaxWidth, "intermediate_size"},
        {spec.max_positions, kMaxPositions, "max_positions"},
        {spec.sliding_window, kMaxPositions, "sliding_window"},
        {spec.sliding_window_pattern, kMaxLayers, "sliding_window_pattern"},
        {spec.type_vocab_size, kMaxVocab, "type_vocab_size"},
        {spec.num_labels, kMaxVocab, "num_labels"},
        // As many experts as heads at most: far above any released MoE (Qwen3: 128).
        {spec.num_experts, kMaxHeads, "num_experts"},
        {spec.num_experts_per_tok, kMaxHeads, "num_experts_per_tok"},
        {spec.moe_intermediate_size, kMaxWidth, "moe_intermediate_size"},
        {spec.rope.original_max_positions, kMaxPositions, "rope_scaling.original_max_positions"}}) {
    if (auto e = CheckRange(v, 0, hi, fmt::format("model '{}': {}", spec.name, field))) return e;
  }
  return std::nullopt;
}

// The parameters, their gradients and optimizer state must fit limits.h's step bound;
// counted in floating point, so a huge model is an error here and not a wrapped count.
std::optional<Error> CheckParameterBytes(const ModelSpec& spec) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const double h = d(spec.hidden_size), q = d(spec.q_dim()), kv = d(spec.kv_dim());
  // A mixture of experts: each expert a gated MLP of moe_intermediate_size, and a router.
  const double mlp = spec.is_moe()
                         ? d(spec.num_experts) * (3 * h * d(spec.moe_intermediate_size) + h)
                         : 3 * h * d(spec.intermediate_size);
  const double per_layer = h * (q + 2 * kv) + q * h + mlp + 8 * h;
  const double embeddings =
      (d(spec.vocab_size) + d(spec.max_positions) + d(spec.type_vocab_size) + d(spec.num_labels)) *
      h;
  const double bytes = 20 * (d(spec.num_layers) * per_layer + 2 * embeddings);
  if (bytes <= limits::kMaxStepBytes) return std::nullopt;
  return MakeError(fmt::format(
      "model '{}' is too large to plan: its weights, gradients and optimizer state exceed 2^62 "
      "bytes",
      spec.name));
}

bool IsMoeFamily(ModelFamily family) {
  return family == ModelFamily::kQwen3Moe || family == ModelFamily::kMixtral;
}

// The mixture-of-experts fields: only the qwen3_moe and mixtral families have them, and
// those need them. Mixtral's experts are intermediate_size wide (modeling_mixtral.py:64)
// and its router always renormalizes the top-k weights (modeling_mixtral.py:109); the
// width is filled in when not given.
std::optional<Error> CheckMoe(ModelSpec& spec) {
  const auto error = [&](const std::string& text) {
    return MakeError(fmt::format("model '{}': {}", spec.name, text));
  };
  if (spec.num_experts == 0) {
    for (auto [v, field] : {std::pair{spec.num_experts_per_tok, "num_experts_per_tok"},
                            {spec.moe_intermediate_size, "moe_intermediate_size"}}) {
      if (v != 0)
        return error(
            fmt::format("{} is {} but num_experts is 0 (a mixture-of-experts field "
                        "needs num_experts)",
                        field, v));
    }
  }
  if (!IsMoeFamily(spec.family)) {
    if (spec.num_experts != 0 || spec.norm_topk_prob)
      return error(fmt::format(
          "{} is only supported for the qwen3_moe and mixtral families "
          "(family is {})",
          spec.num_experts != 0 ? "num_experts" : "norm_topk_prob", FamilyName(spec.family)));
    return std::nullopt;
  }
  if (spec.num_experts <= 0)
    return error(fmt::format("num_experts must be a positive integer for the {} family (got {})",
                             FamilyName(spec.family), spec.num_experts));
  if (spec.num_experts_per_tok < 1 || spec.num_experts_per_tok > spec.num_experts)
    return error(fmt::format("num_experts_per_tok must be between 1 and num_experts {} (got {})",
                             spec.num_experts, spec.num_experts_per_tok));
  if (spec.family == ModelFamily::kMixtral) {
    if (spec.moe_intermediate_size == 0) spec.moe_intermediate_size = spec.intermediate_size;
    if (spec.moe_intermediate_size != spec.intermediate_size)
      return error(
          fmt::format("moe_intermediate_size {} must equal intermediate_size {} for the "
                      "mixtral family (its experts are intermediate_size wide)",
                      spec.moe_intermediate_size, spec.intermediate_size));
    if (!spec.norm_topk_prob)
      return error(
          "norm_topk_prob must be true for the mixtral family (its router always "
          "renormalizes the top-k weights)");
  }
  if (spec.moe_intermediate_size <= 0)
    return error(fmt::format("moe_intermediate_size must be a positive integer (got {})",
                             spec.moe_intermediate_size));
  return std::nullopt;
}

}  // namespace

Result<ModelSpec> Validate(ModelSpec spec) {
  auto positive = [&](int64_t v, const char* field) -> std::optional<Error> {
    if (v <= 0)
      return MakeError(
          fmt::format("model '{}': {} must be a positive integer (got {})", spec.name, field, v));
    return std::nullopt;
  };
  for (auto [v, field] : {std::pair{spec.vocab_size, "vocab_size"},
                          {spec.hidden_size, "hidden_size"},
                          {spec.num_layers, "num_layers"},
                          {spec.num_heads, "num_heads"},
                          {spec.max_positions, "max_positions"}}) {
    if (auto e = positive(v, field)) return *e;
  }
  if (auto e = CheckBounds(spec)) return *e;
  if (spec.head_dim == 0) {
    if (spec.hidden_size % spec.num_heads != 0) {
      return MakeError(
          fmt::format("model '{}': hidden_size {} is not divisible by num_heads {}; give head_dim",
                      spec.name, spec.hidden_size, spec.num_heads));
    }
    spec.head_dim = spec.hidden_size / spec.num_heads;
  }
  if (spec.num_kv_heads == 0) spec.num_kv_heads = spec.num_heads;
  if (spec.activation.empty()) {
    spec.activation = spec.family == ModelFamily::kGpt2   ? "gelu_new"
                      : spec.family == ModelFamily::kBert ? "gelu"
                      : IsGemma(spec.family)              ? "gelu_pytorch_tanh"
                                                          : "silu";
  }
  const bool llama = IsLlamaLike(spec.family);
  const std::string_view llama_act = IsGemma(spec.family) ? "gelu_pytorch_tanh" : "silu";
  if (llama ? spec.activation != llama_act
            : spec.activation != "gelu_new" && spec.activation != "gelu" &&
                  spec.activation != "gelu_pytorch_tanh") {
    return MakeError(
        fmt::format("model '{}': activation '{}' is not supported for the {} family "
                    "(supported: {})",
                    spec.name, spec.activation, FamilyName(spec.family),
                    llama ? llama_act : "gelu_new, gelu, gelu_pytorch_tanh"));
  }
  if (spec.intermediate_size == 0 && spec.family == ModelFamily::kGpt2)
    spec.intermediate_size = 4 * spec.hidden_size;
  if (auto e = positive(spec.head_dim, "head_dim")) return *e;
  if (auto e = positive(spec.num_kv_heads, "num_kv_heads")) return *e;
  if (auto e = positive(spec.intermediate_size, "intermediate_size")) return *e;
  if (spec.num_heads % spec.num_kv_heads != 0) {
    return MakeError(fmt::format("model '{}': num_heads {} must be a multiple of num_kv_heads {}",
                                 spec.name, spec.num_heads, spec.num_kv_heads));
  }
  if (!llama && spec.num_kv_heads != spec.num_heads) {
    return MakeError(
        fmt::format("model '{}': grouped-query attention is only supported for llama-like decoders",
                    spec.name));
  }
  if (!llama && spec.q_dim() != spec.hidden_size) {
    return MakeError(
        fmt::format("model '{}': num_heads * head_dim must equal hidden_size", spec.name));
  }
  for (auto [p, field] : {std::pair{spec.hidden_dropout, "hidden_dropout"},
                          {spec.attention_dropout, "attention_dropout"}}) {
    if (!(p >= 0.0 && p < 1.0))
      return MakeError(
          fmt::format("model '{}': {} must be in [0, 1) (got {})", spec.name, field, p));
  }
  if (spec.family == ModelFamily::kBert) {
    if (auto e = positive(spec.type_vocab_size, "type_vocab_size")) return *e;
    if (auto e = positive(spec.num_labels, "num_labels")) return *e;
  }
  if (!(spec.rope.theta > 0) || !std::isfinite(spec.rope.theta) ||
      !(spec.rope.llama3_factor >= 0) || !std::isfinite(spec.rope.llama3_factor) ||
      !std::isfinite(spec.rope.high_freq_factor) ||
      (spec.rope.llama3_factor > 0 &&
       (!(spec.rope.high_freq_factor > spec.rope.low_freq_factor) ||
        spec.rope.low_freq_factor <= 0 || spec.rope.original_max_positions <= 0))) {
    return MakeError(fmt::format(
        "model '{}': rope parameters must be positive (theta, factor, original_max_positions) "
        "with high_freq_factor > low_freq_factor",
        spec.name));
  }
  for (auto [v, field] : {std::pair{spec.query_pre_attn_scalar, "query_pre_attn_scalar"},
                          {spec.attn_logit_softcap, "attn_logit_softcapping"},
                          {spec.final_logit_softcap, "final_logit_softcapping"},
                          {spec.rope_local_theta, "rope_local_base_freq"},
                          {spec.rope.linear_factor, "rope_scaling.factor (linear)"}}) {
    if (!(v >= 0) || !std::isfinite(v) || v > 1e12)
      return MakeError(fmt::format("model '{}': {} must be a non-negative number (got {})",
                                   spec.name, field, v));
  }
  if (!(spec.norm_eps > 0) || !std::isfinite(spec.norm_eps))
    return MakeError(fmt::format("model '{}': norm_eps must be a positive number", spec.name));
  if (auto e = CheckMoe(spec)) return *e;
  if (auto e = CheckParameterBytes(spec)) return *e;
  return spec;
}

Result<ModelSpec> ParseModelSpecYaml(std::string_view yaml_text, std::string_view origin) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return MakeError(
        fmt::format("{}: malformed YAML at line {}: {}", origin, e.mark.line + 1, e.msg));
  }
  if (!root.IsMap())
    return MakeError(fmt::format("{}: a model spec must be a YAML mapping", origin));
  static const char* kKnown[] = {"name",
                                 "family",
                                 "vocab_size",
                                 "hidden_size",
                                 "num_layers",
                                 "num_heads",
                                 "num_kv_heads",
                                 "head_dim",
                                 "intermediate_size",
                                 "max_positions",
                                 "sliding_window",
                                 "sliding_window_pattern",
                                 "query_pre_attn_scalar",
                                 "attn_logit_softcapping",
                                 "final_logit_softcapping",
                                 "rope_local_theta",
                                 "tie_embeddings",
                                 "qkv_bias",
                                 "norm_eps",
                                 "hidden_dropout",
                                 "attention_dropout",
                                 "type_vocab_size",
                                 "num_labels",
                                 "activation",
                                 "rope_theta",
                                 "rope_scaling",
                                 "num_experts",
                                 "num_local_experts",
                                 "num_experts_per_tok",
                                 "moe_intermediate_size",
                                 "norm_topk_prob",
                                 "source"};
  for (const auto& kv : root) {
    if (!kv.first.IsScalar())
      return MakeError(fmt::format("{}: a model spec's keys must be field names", origin));
    const std::string key = kv.first.Scalar();
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
      return MakeError(fmt::format("{}: unknown field '{}' in model spec", origin, key));
    }
  }
  ModelSpec spec;
  try {
    if (!root["family"])
      return MakeError(fmt::format("{}: missing field 'family' ({})", origin,
                                   ChoiceList(NamesIn(kFamilyNames))));
    auto family = ParseIn(kFamilyNames, root["family"].as<std::string>(), "family");
    if (!family) return MakeError(fmt::format("{}: {}", origin, family.error().message));
    spec.family = *family;
    spec.name = root["name"] ? root["name"].as<std::string>() : std::string(origin);
    for (auto [field, target] : {std::pair{"vocab_size", &spec.vocab_size},
                                 {"hidden_size", &spec.hidden_size},
                                 {"num_layers", &spec.num_layers},
                                 {"num_heads", &spec.num_heads},
                                 {"max_positions", &spec.max_positions}}) {
      if (!root[field]) return MakeError(fmt::format("{}: missing field '{}'", origin, field));
      *target = root[field].as<int64_t>();
    }
    for (auto [field, target] : {std::pair{"num_kv_heads", &spec.num_kv_heads},
                                 {"head_dim", &spec.head_dim},
                                 {"intermediate_size", &spec.intermediate_size},
                                 {"sliding_window", &spec.sliding_window},
                                 {"sliding_window_pattern", &spec.sliding_window_pattern},
                                 {"type_vocab_size", &spec.type_vocab_size},
                                 {"num_labels", &spec.num_labels},
                                 {"num_experts", &spec.num_experts},
                                 {"num_experts_per_tok", &spec.num_experts_per_tok},
                                 {"moe_intermediate_size", &spec.moe_intermediate_size}}) {
      if (root[field]) *target = root[field].as<int64_t>();
    }
    // Mixtral's config.json calls the experts num_local_experts (configuration_mixtral.py).
    if (root["num_local_experts"]) {
      if (root["num_experts"])
        return MakeError(
            fmt::format("{}: give num_experts or num_local_experts, not both", origin));
      spec.num_experts = root["num_local_experts"].as<int64_t>();
    }
    // Mixtral's router always renormalizes (modeling_mixtral.py:109): true unless stated.
    spec.norm_topk_prob = root["norm_topk_prob"] ? root["norm_topk_prob"].as<bool>()
                                                 : spec.family == ModelFamily::kMixtral;
    if (root["tie_embeddings"]) spec.tie_embeddings = root["tie_embeddings"].as<bool>();
    if (root["qkv_bias"]) spec.qkv_bias = root["qkv_bias"].as<bool>();
    if (root["norm_eps"]) spec.norm_eps = root["norm_eps"].as<double>();
    if (root["hidden_dropout"]) spec.hidden_dropout = root["hidden_dropout"].as<double>();
    if (root["attention_dropout"]) spec.attention_dropout = root["attention_dropout"].as<double>();
    if (root["activation"]) spec.activation = root["activation"].as<std::string>();
    for (auto [field, target] : {std::pair{"query_pre_attn_scalar", &spec.query_pre_attn_scalar},
                                 {"attn_logit_softcapping", &spec.attn_logit_softcap},
                                 {"final_logit_softcapping", &spec.final_logit_softcap},
                                 {"rope_local_theta", &spec.rope_local_theta},
                                 {"rope_theta", &spec.rope.theta}}) {
      if (root[field]) *target = root[field].as<double>();
    }
    if (const YAML::Node scaling = root["rope_scaling"];
        scaling && scaling.IsMap() && scaling["type"] &&
        scaling["type"].as<std::string>() == "linear") {
      spec.rope.linear_factor = scaling["factor"] ? scaling["factor"].as<double>() : 1.0;
    } else if (scaling) {
      if (!scaling.IsMap() || !scaling["type"] || scaling["type"].as<std::string>() != "llama3")
        return MakeError(
            fmt::format("{}: rope_scaling must be a map with type: llama3 or linear", origin));
      spec.rope.llama3_factor = scaling["factor"] ? scaling["factor"].as<double>() : 8.0;
      if (scaling["low_freq_factor"])
        spec.rope.low_freq_factor = scaling["low_freq_factor"].as<double>();
      if (scaling["high_freq_factor"])
        spec.rope.high_freq_factor = scaling["high_freq_factor"].as<double>();
      if (scaling["original_max_positions"])
        spec.rope.original_max_positions = scaling["original_max_positions"].as<int64_t>();
    }
  } catch (const YAML::Exception& e) {
    return MakeError(fmt::format("{}: bad value at line {}: {}", origin, e.mark.line + 1, e.msg));
  }
  return Validate(std::move(spec));
}

}  // namespace headroom
