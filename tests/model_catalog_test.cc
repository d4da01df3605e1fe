// Exact parameter counts (published numbers), Hugging Face config import and the
// errors of malformed specs.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "models/hf_config.h"

namespace headroom {
namespace {

int64_t CountParams(const ModelSpec& spec) {
  auto graph = BuildGraph(spec, {});
  EXPECT_TRUE(graph.ok()) << (graph ? "" : graph.error().message);
  return graph->ParameterCount();
}

int64_t CatalogParams(const char* name) {
  auto spec = LoadCatalogModel(name);
  EXPECT_TRUE(spec.ok()) << (spec ? "" : spec.error().message);
  return CountParams(*spec);
}

TEST(ParameterCount, MatchesPublishedCounts) {
  EXPECT_EQ(CatalogParams("gpt2"), 124'439'808);
  EXPECT_EQ(CatalogParams("llama-2-7b"), 6'738'415'616);
  EXPECT_EQ(CatalogParams("llama-2-70b"), 68'976'648'192);
  EXPECT_EQ(CatalogParams("llama-3-8b"), 8'030'261'248);
  EXPECT_EQ(CatalogParams("mistral-7b"), 7'241'732'096);
  EXPECT_EQ(CatalogParams("qwen2.5-0.5b"), 494'032'768);  // tied embeddings, qkv bias
  EXPECT_EQ(CatalogParams("llama-3.2-1b"), 1'235'814'400);
  // BertModel 109,482,240 + a 768 x 2 classifier with bias.
  EXPECT_EQ(CatalogParams("bert-base"), 109'482'240 + 768 * 2 + 2);
}

// The counts transformers 5.24.0 reports for each Hub config.json, tied weights once:
// sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters()) on the
// meta device (tests/reference/configs/SOURCES.md). Both the catalog entry and the
// config.json import must give them.
struct TransformersCount {
  const char* name;
  int64_t params;
};
constexpr TransformersCount kNewFamilyCounts[] = {
    {"llama-3.1-8b", 8'030'261'248},     {"llama-3.1-70b", 70'553'706'496},
    {"llama-3.1-405b", 405'853'388'800}, {"llama-3.3-70b", 70'553'706'496},
    {"qwen3-0.6b", 596'049'920},         {"qwen3-1.7b", 1'720'574'976},
    {"qwen3-4b", 4'022'468'096},         {"qwen3-8b", 8'190'735'360},
    {"qwen3-14b", 14'768'307'200},       {"qwen3-32b", 32'762'123'264},
    {"phi-3-mini", 3'821'079'552},       {"phi-4", 14'659'507'200},
    {"gemma-2-2b", 2'614'341'888},       {"gemma-2-9b", 9'241'705'984},
    {"gemma-3-1b", 999'885'952},         {"gemma-3-4b", 3'880'263'168},
    {"gemma-3-12b", 11'766'034'176},     {"gemma-3-27b", 27'009'346'304},
    {"qwen3-30b-a3b", 30'532'122'624},   {"mixtral-8x7b", 46'702'792'704},
};

TEST(ParameterCount, NewFamiliesMatchTransformers) {
  for (const auto& [name, params] : kNewFamilyCounts) {
    EXPECT_EQ(CatalogParams(name), params) << name;
    const std::string path =
        std::string(HEADROOM_TEST_DATA_DIR) + "/../reference/configs/" + name + ".json";
    auto spec = ResolveModel(path);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(CountParams(*spec), params) << path;
    auto catalog = LoadCatalogModel(name);
    ASSERT_TRUE(catalog.ok());
    spec->name = catalog->name;
    EXPECT_EQ(*spec, *catalog) << name << ": the catalog entry and its config.json differ";
  }
}

TEST(ParameterCount, LoraAddsOnlyAdapters) {
  auto spec = LoadCatalogModel("llama-2-7b");
  ASSERT_TRUE(spec.ok());
  GraphOptions opts;
  opts.fine_tune = {.mode = FineTuneMode::kLora, .lora_rank = 16, .lora_targets = {"q", "v"}};
  auto graph = BuildGraph(*spec, opts);
  ASSERT_TRUE(graph.ok());
  // Per layer: q and v each get A [16, 4096] and B [4096, 16].
  const int64_t adapters = 32 * 2 * (16 * 4096 + 4096 * 16);
  EXPECT_EQ(graph->TrainableParameterCount(), adapters);
  EXPECT_EQ(graph->ParameterCount(), 6'738'415'616 + adapters);
}

TEST(Catalog, ListsEveryRequiredModel) {
  const auto names = CatalogModelNames();
  for (const char* required :
       {"gpt2",         "gpt2-medium",    "gpt2-large",   "gpt2-xl",     "llama-2-7b",
        "llama-2-13b",  "llama-2-70b",    "llama-3-8b",   "llama-3-70b", "llama-3.2-1b",
        "llama-3.2-3b", "mistral-7b",     "qwen2.5-0.5b", "qwen2.5-7b",  "bert-base",
        "bert-large",   "tiny-gpt2",      "tiny-llama",   "tiny-bert",   "qwen3-30b-a3b",
        "mixtral-8x7b", "tiny-qwen3-moe", "tiny-mixtral"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  }
}

TEST(Catalog, UnknownModelSuggestsCloseNames) {
  auto spec = LoadCatalogModel("llama-2-7");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("llama-2-7b"), std::string::npos) << spec.error().message;
}

TEST(HfConfig, LlamaConfigGivesExactCount) {
  const char* json = R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "intermediate_size": 11008, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
    "tie_word_embeddings": false})";
  auto spec = ParseHfConfigJson(json, "config.json");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(CountParams(*spec), 6'738'415'616);
}

// transformers' save_pretrained writes Python's JSON: Infinity, -Infinity and NaN as bare
// literals (Granite-4's and Nemotron-H's "time_step_limit": [0.0, Infinity]). They read as
// the numbers Python means, inside strings they stay text, and a field headroom uses must
// still be finite.
TEST(HfConfig, PythonsNonFiniteLiteralsReadAsTransformersReadsThem) {
  const std::string fields = R"("vocab_size": 32000, "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "intermediate_size": 11008, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
    "tie_word_embeddings": false)";
  const auto plain = ParseHfConfigJson(R"({"model_type": "llama", )" + fields + "}", "a.json");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  const auto python = ParseHfConfigJson(
      R"({"model_type": "llama", "time_step_limit": [0.0, Infinity], "floor": -Infinity,
          "unset": NaN, "_name_or_path": "NaN \"Infinity\" org/model", )" +
          fields + "}",
      "b.json");
  ASSERT_TRUE(python.ok()) << python.error().message;
  EXPECT_EQ(python->name, "NaN \"Infinity\" org/model");  // a string keeps its text
  EXPECT_EQ(CountParams(*python), CountParams(*plain));
  const auto non_finite = ParseHfConfigJson(
      R"({"model_type": "llama", "rope_theta": Infinity, )" + fields + "}", "c.json");
  ASSERT_FALSE(non_finite.ok());
  EXPECT_NE(non_finite.error().message.find("rope"), std::string::npos)
      << non_finite.error().message;
  EXPECT_FALSE(
      ParseHfConfigJson(R"({"model_type": "llama", "x": Infinityx, )" + fields + "}", "d.json")
          .ok());
}

TEST(HfConfig, MistralQwenGpt2BertImport) {
  auto mistral =
      ParseHfConfigJson(R"({"model_type": "mistral", "vocab_size": 32000, "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "max_position_embeddings": 32768})",
                        "m.json");
  ASSERT_TRUE(mistral.ok()) << mistral.error().message;
  EXPECT_EQ(CountParams(*mistral), 7'241'732'096);

  auto qwen = ParseHfConfigJson(R"({"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "tie_word_embeddings": true})",
                                "q.json");
  ASSERT_TRUE(qwen.ok()) << qwen.error().message;
  EXPECT_TRUE(qwen->qkv_bias);
  EXPECT_EQ(CountParams(*qwen), 494'032'768);

  auto gpt2 =
      ParseHfConfigJson(R"({"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12,
    "n_head": 12, "n_positions": 1024, "n_inner": null})",
                        "g.json");
  ASSERT_TRUE(gpt2.ok()) << gpt2.error().message;
  EXPECT_EQ(CountParams(*gpt2), 124'439'808);

  auto bert = ParseHfConfigJson(R"({"model_type": "bert", "vocab_size": 30522, "hidden_size": 768,
    "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
    "max_position_embeddings": 512, "type_vocab_size": 2})",
                                "b.json");
  ASSERT_TRUE(bert.ok()) << bert.error().message;
  EXPECT_EQ(CountParams(*bert), 109'483'778);
}

// The mixture-of-experts fields as transformers 5.24 reads them: Qwen3MoeConfig's
// (configuration_qwen3_moe.py:97-104, no head_dim default: hidden / heads) and
// MixtralConfig's (configuration_mixtral.py:84-88: num_local_experts, experts as wide as
// intermediate_size, a router that always renormalizes, rope_theta 1e6).
// MistralConfig defaults sliding_window to 4096 (configuration_mistral.py:79) and every
// layer then attends within it; v0.2 and later write null: causal.
TEST(HfConfig, MistralSlidingWindowDefaultsTo4096AndNullMeansNone) {
  const std::string base =
      R"({"model_type": "mistral", "vocab_size": 32000, "hidden_size": 4096,
          "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
          "intermediate_size": 14336, "max_position_embeddings": 32768)";
  auto absent = ParseHfConfigJson(base + "}", "absent");
  ASSERT_TRUE(absent.ok()) << absent.error().message;
  EXPECT_EQ(absent->sliding_window, 4096);
  auto null = ParseHfConfigJson(base + R"(, "sliding_window": null})", "null");
  ASSERT_TRUE(null.ok()) << null.error().message;
  EXPECT_EQ(null->sliding_window, 0);
  auto set = ParseHfConfigJson(base + R"(, "sliding_window": 2048})", "set");
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->sliding_window, 2048);
  auto catalog = LoadCatalogModel("mistral-7b");
  ASSERT_TRUE(catalog.ok());
  EXPECT_EQ(catalog->sliding_window, 4096);  // Mistral-7B-v0.1's config.json
}

TEST(HfConfig, MixtureOfExpertsImport) {
  const std::string configs = std::string(HEADROOM_TEST_DATA_DIR) + "/../reference/configs/";
  auto qwen = ResolveModel(configs + "qwen3-30b-a3b.json");
  ASSERT_TRUE(qwen.ok()) << qwen.error().message;
  EXPECT_EQ(qwen->family, ModelFamily::kQwen3Moe);
  EXPECT_TRUE(qwen->has_qk_norm());
  EXPECT_TRUE(qwen->is_moe());
  EXPECT_EQ(qwen->num_experts, 128);
  EXPECT_EQ(qwen->num_experts_per_tok, 8);
  EXPECT_EQ(qwen->moe_intermediate_size, 768);
  EXPECT_TRUE(qwen->norm_topk_prob);
  EXPECT_EQ(qwen->head_dim, 128);
  EXPECT_EQ(qwen->sliding_window, 0);

  auto mixtral = ResolveModel(configs + "mixtral-8x7b.json");
  ASSERT_TRUE(mixtral.ok()) << mixtral.error().message;
  EXPECT_EQ(mixtral->family, ModelFamily::kMixtral);
  EXPECT_FALSE(mixtral->has_qk_norm());
  EXPECT_EQ(mixtral->num_experts, 8);
  EXPECT_EQ(mixtral->num_experts_per_tok, 2);
  EXPECT_EQ(mixtral->moe_intermediate_size, 14336);
  EXPECT_TRUE(mixtral->norm_topk_prob);
  EXPECT_EQ(mixtral->head_dim, 128);
  EXPECT_EQ(mixtral->sliding_window, 0);  // null
  EXPECT_EQ(mixtral->rope.theta, 1e6);

  // The defaults, where a config leaves the fields out.
  const std::string decoder = R"("vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 176,
    "max_position_embeddings": 256)";
  auto sparse = ParseHfConfigJson(R"({"model_type": "qwen3_moe", )" + decoder + "}", "q.json");
  ASSERT_TRUE(sparse.ok()) << sparse.error().message;
  EXPECT_EQ(sparse->head_dim, 16);  // hidden / heads, not Qwen3's 128
  EXPECT_EQ(sparse->num_experts, 128);
  EXPECT_EQ(sparse->num_experts_per_tok, 8);
  EXPECT_EQ(sparse->moe_intermediate_size, 768);
  EXPECT_FALSE(sparse->norm_topk_prob);
  EXPECT_EQ(sparse->rope.theta, 10000.0);
  auto local = ParseHfConfigJson(
      R"({"model_type": "mixtral", "num_experts": 4, "sliding_window": 128, )" + decoder + "}",
      "m.json");
  ASSERT_TRUE(local.ok()) << local.error().message;
  EXPECT_EQ(local->num_experts, 4);  // attribute_map: num_experts is num_local_experts
  EXPECT_EQ(local->num_experts_per_tok, 2);
  EXPECT_EQ(local->moe_intermediate_size, 176);
  EXPECT_EQ(local->sliding_window, 128);
  EXPECT_EQ(local->rope.theta, 1e6);
  EXPECT_EQ(local->norm_eps, 1e-5);
}

TEST(HfConfig, MixtureOfExpertsErrorsNameTheField) {
  const std::string decoder = R"("vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 176,
    "max_position_embeddings": 256, )";
  for (auto [type, extra, field] :
       {std::tuple{"qwen3_moe", R"("decoder_sparse_step": 2)", "decoder_sparse_step"},
        {"qwen3_moe", R"("mlp_only_layers": [0])", "mlp_only_layers"},
        {"qwen3_moe", R"("output_router_logits": true)", "output_router_logits"},
        {"qwen3_moe", R"("attention_bias": true)", "attention_bias"},
        {"qwen3_moe", R"("use_sliding_window": true)", "use_sliding_window"},
        {"qwen3_moe", R"("num_experts": 4, "num_experts_per_tok": 8)", "num_experts_per_tok"},
        {"qwen3_moe", R"("moe_intermediate_size": 0)", "moe_intermediate_size"},
        {"qwen3_moe", R"("num_experts": 0)", "num_experts"},
        {"mixtral", R"("router_jitter_noise": 0.01)", "router_jitter_noise"},
        {"mixtral", R"("output_router_logits": true)", "output_router_logits"},
        {"mixtral", R"("num_local_experts": 8, "num_experts": 4)", "num_local_experts"},
        {"mixtral", R"("num_experts_per_tok": 0)", "num_experts_per_tok"}}) {
    const std::string json =
        std::string(R"({"model_type": ")") + type + R"(", )" + decoder + extra + "}";
    auto spec = ParseHfConfigJson(json, "c.json");
    ASSERT_FALSE(spec.ok()) << json;
    EXPECT_NE(spec.error().message.find(field), std::string::npos) << spec.error().message;
    EXPECT_EQ(spec.error().message.find('\n'), std::string::npos) << spec.error().message;
  }
}

TEST(ModelSpecYaml, MixtureOfExpertsFields) {
  const std::string base =
      "vocab_size: 512\nhidden_size: 64\nnum_layers: 2\nnum_heads: 4\nmax_positions: 256\n"
      "intermediate_size: 176\n";
  auto mixtral = ParseModelSpecYaml(
      "family: mixtral\n" + base + "num_local_experts: 8\nnum_experts_per_tok: 2\n", "m.yaml");
  ASSERT_TRUE(mixtral.ok()) << mixtral.error().message;
  EXPECT_EQ(mixtral->num_experts, 8);
  EXPECT_EQ(mixtral->moe_intermediate_size, 176);  // Mixtral's experts: intermediate_size
  EXPECT_TRUE(mixtral->norm_topk_prob);            // Mixtral always renormalizes
  auto tiny = LoadCatalogModel("tiny-qwen3-moe");
  ASSERT_TRUE(tiny.ok()) << tiny.error().message;
  EXPECT_EQ(tiny->num_experts, 8);
  EXPECT_EQ(tiny->moe_intermediate_size, 48);
  EXPECT_EQ(tiny->q_dim(), 64);
  EXPECT_TRUE(tiny->norm_topk_prob);

  for (auto [text, field] :
       {std::pair{"family: qwen3_moe\nnum_experts: 4\nnum_experts_per_tok: 8\n"
                  "moe_intermediate_size: 48\n",
                  "num_experts_per_tok"},
        {"family: qwen3_moe\nnum_experts: 4\nnum_experts_per_tok: 0\n"
         "moe_intermediate_size: 48\n",
         "num_experts_per_tok"},
        {"family: qwen3_moe\nnum_experts: 4\nnum_experts_per_tok: 2\n", "moe_intermediate_size"},
        {"family: qwen3_moe\nnum_experts: -4\nnum_experts_per_tok: 2\n"
         "moe_intermediate_size: 48\n",
         "num_experts"},
        {"family: qwen3_moe\n", "num_experts"},
        {"family: mixtral\n", "num_experts"},
        {"family: llama\nnum_experts_per_tok: 2\n", "num_experts_per_tok"},
        {"family: qwen3_moe\nmoe_intermediate_size: 48\n", "moe_intermediate_size"},
        {"family: llama\nnum_experts: 8\nnum_experts_per_tok: 2\n"
         "moe_intermediate_size: 48\n",
         "num_experts"},
        {"family: qwen3\nnorm_topk_prob: true\n", "norm_topk_prob"},
        {"family: mixtral\nnum_experts: 8\nnum_experts_per_tok: 2\n"
         "moe_intermediate_size: 48\n",
         "moe_intermediate_size"},
        {"family: mixtral\nnum_experts: 8\nnum_experts_per_tok: 2\nnorm_topk_prob: false\n",
         "norm_topk_prob"},
        {"family: mixtral\nnum_experts: 8\nnum_local_experts: 8\n", "num_local_experts"}}) {
    auto spec = ParseModelSpecYaml(std::string(text) + base, "m.yaml");
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_NE(spec.error().message.find(field), std::string::npos) << spec.error().message;
  }
}

TEST(HfConfig, ErrorsNameTheProblem) {
  auto unsupported = ParseHfConfigJson(R"({"model_type": "mamba"})", "c.json");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_NE(unsupported.error().message.find("'mamba' is not supported"), std::string::npos);

  auto missing = ParseHfConfigJson(R"({"model_type": "llama", "vocab_size": 32000})", "c.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("missing field 'hidden_size'"), std::string::npos)
      << missing.error().message;

  auto malformed = ParseHfConfigJson(R"({"model_type": "llama", )", "c.json");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.error().message.find("malformed JSON"), std::string::npos);

  auto no_type = ParseHfConfigJson(R"({"hidden_size": 4})", "c.json");
  ASSERT_FALSE(no_type.ok());
  EXPECT_NE(no_type.error().message.find("model_type"), std::string::npos);
}

TEST(ModelSpecYaml, ErrorsNameTheField) {
  auto bad_yaml = ParseModelSpecYaml("family: [llama", "m.yaml");
  ASSERT_FALSE(bad_yaml.ok());
  EXPECT_NE(bad_yaml.error().message.find("malformed YAML"), std::string::npos);

  auto missing = ParseModelSpecYaml("family: llama\nvocab_size: 10\n", "m.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("missing field 'hidden_size'"), std::string::npos);

  auto negative = ParseModelSpecYaml(
      "family: gpt2\nvocab_size: 10\nhidden_size: -8\nnum_layers: 1\nnum_heads: 2\nmax_positions: "
      "8\n",
      "m.yaml");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("hidden_size must be a positive integer"),
            std::string::npos);

  auto unknown = ParseModelSpecYaml("family: gpt2\nhiden_size: 8\n", "m.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("unknown field 'hiden_size'"), std::string::npos);

  auto gqa = ParseModelSpecYaml(
      "family: llama\nvocab_size: 10\nhidden_size: 8\nnum_layers: 1\nnum_heads: 4\nnum_kv_heads: "
      "3\n"
      "intermediate_size: 16\nmax_positions: 8\n",
      "m.yaml");
  ASSERT_FALSE(gqa.ok());
  EXPECT_NE(gqa.error().message.find("multiple of num_kv_heads"), std::string::npos);
}

TEST(LoraTargets, UnknownTargetIsAnErrorListingWhatExists) {
  auto spec = LoadCatalogModel("gpt2");
  ASSERT_TRUE(spec.ok());
  GraphOptions opts;
  opts.fine_tune = {.mode = FineTuneMode::kLora, .lora_targets = {"q"}};
  auto graph = BuildGraph(*spec, opts);
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.error().message.find("target qkv"), std::string::npos) << graph.error().message;
}

}  // namespace
}  // namespace headroom
