// Exact parameter counts (published numbers), Hugging Face config import and the
// errors of malformed specs.
#include <gtest/gtest.h>

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
       {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "llama-2-7b", "llama-2-13b", "llama-2-70b",
        "llama-3-8b", "llama-3-70b", "llama-3.2-1b", "llama-3.2-3b", "mistral-7b", "qwen2.5-0.5b",
        "qwen2.5-7b", "bert-base", "bert-large", "tiny-gpt2", "tiny-llama", "tiny-bert"}) {
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
