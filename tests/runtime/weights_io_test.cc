// Weights in and out: safetensors round trips exactly (single file and sharded), bad
// files are errors that name the tensor, the LoRA adapter is saved in PEFT's layout.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "models/catalog.h"
#include "runtime/hf_weights.h"
#include "runtime/safetensors.h"
#include "runtime/trainer.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("headroom_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TrainingConfig TinyConfig() {
  TrainingConfig c;
  c.micro_batch = 2;
  c.seq_len = 16;
  c.precision = Precision::kFp32;
  c.optimizer = OptimizerKind::kAdamW;
  return c;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, RoundTripsEveryDtypeExactly) {
  const fs::path file = TempDir("st_dtypes") / "t.safetensors";
  const NamedTensors tensors = {
      {"a.f32", torch::randn({3, 5})},
      {"b.bf16", torch::randn({7}).to(torch::kBFloat16)},
      {"c.f16", torch::randn({2, 2, 2}).to(torch::kHalf)},
      {"d.i64", torch::arange(11, torch::kLong)},
      {"e.transposed", torch::randn({4, 6}).t()},  // non-contiguous input
      {"f.scalar", torch::tensor(3.5)},
  };
  WriteSafetensors(file, tensors, {{"format", "pt"}});
  const SafetensorsFile read(file);
  EXPECT_EQ(read.metadata().at("format"), "pt");
  ASSERT_EQ(read.entries().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const at::Tensor back = read.Read(name);
    EXPECT_EQ(back.scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(back, t)) << name;
  }
  // Data starts 8-byte aligned, as the format asks.
  std::ifstream in(file, std::ios::binary);
  uint64_t header = 0;
  in.read(reinterpret_cast<char*>(&header), 8);
  EXPECT_EQ(header % 8, 0u);
}

TEST(Safetensors, TruncatedFileIsAnErrorNamingTheTensor) {
  const fs::path file = TempDir("st_truncated") / "t.safetensors";
  WriteSafetensors(file, {{"first", torch::ones({16})}, {"second.weight", torch::ones({64})}});
  fs::resize_file(file, fs::file_size(file) - 10);
  const std::string error = ErrorOf([&] { SafetensorsFile f(file); });
  EXPECT_NE(error.find("second.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;

  fs::resize_file(file, 5);
  EXPECT_NE(ErrorOf([&] { SafetensorsFile f(file); }).find("not a safetensors file"),
            std::string::npos);
}

TEST(Safetensors, FullWeightsRoundTripThroughTheHuggingFaceLayout) {
  // GPT-2 stores Conv1D weights transposed: saving and loading must undo each other.
  const ModelSpec spec = *LoadCatalogModel("tiny-gpt2");
  Trainer trained(spec, TinyConfig(), {false, false}, {.seed = 1});
  trained.Step();
  const fs::path dir = TempDir("st_full");
  trained.SaveWeights(dir);
  const SafetensorsFile file(dir / "model.safetensors");
  const auto& c_attn = file.entries().at("transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(c_attn.shape, (std::vector<int64_t>{spec.hidden_size, 3 * spec.hidden_size}));

  Trainer fresh(spec, TinyConfig(), {false, false}, {.seed = 99});
  const LoadSummary summary = fresh.LoadWeights(SafetensorsCheckpoint(dir));
  EXPECT_TRUE(summary.missing.empty());
  EXPECT_EQ(summary.unused, 0);
  const auto a = trained.NamedParameters(), b = fresh.NamedParameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
  EXPECT_EQ(summary.loaded, static_cast<int>(a.size()));
}

TEST(Safetensors, ShardedCheckpointLoadsThroughItsIndex) {
  const ModelSpec spec = *LoadCatalogModel("tiny-llama");
  Trainer source(spec, TinyConfig(), {false, false}, {.seed = 4});
  const NamedTensors all = ToHfStateDict(spec, source.NamedParameters());
  const fs::path dir = TempDir("st_sharded");
  const size_t half = all.size() / 2;
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (int shard = 0; shard < 2; ++shard) {
    const std::string name = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
    NamedTensors part(all.begin() + (shard ? half : 0), shard ? all.end() : all.begin() + half);
    WriteSafetensors(dir / name, part);
    for (const auto& [tensor, value] : part) index["weight_map"][tensor] = name;
  }
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();

  Trainer target(spec, TinyConfig(), {false, false}, {.seed = 5});
  EXPECT_EQ(target.LoadWeights(SafetensorsCheckpoint(dir)).loaded, static_cast<int>(all.size()));
  const auto a = source.NamedParameters(), b = target.NamedParameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
}

TEST(Safetensors, MismatchedShapeIsAnErrorNamingTheTensor) {
  const ModelSpec spec = *LoadCatalogModel("tiny-llama");
  Trainer t(spec, TinyConfig(), {false, false}, {.seed = 1});
  NamedTensors wrong = ToHfStateDict(spec, t.NamedParameters());
  wrong[3].second = torch::zeros({wrong[3].second.size(0) + 1, 1});
  const fs::path dir = TempDir("st_mismatch");
  WriteSafetensors(dir / "model.safetensors", wrong);
  const std::string error = ErrorOf([&] { t.LoadWeights(SafetensorsCheckpoint(dir)); });
  EXPECT_NE(error.find("'" + wrong[3].first + "'"), std::string::npos) << error;
  EXPECT_NE(error.find("shape"), std::string::npos) << error;

  // A checkpoint of a different model entirely.
  WriteSafetensors(dir / "model.safetensors", {{"unrelated.weight", torch::ones({2})}});
  EXPECT_NE(ErrorOf([&] { t.LoadWeights(SafetensorsCheckpoint(dir)); }).find("holds none"),
            std::string::npos);
}

TEST(PeftAdapter, SavedInPeftsLayoutWithItsConfig) {
  const ModelSpec spec = *LoadCatalogModel("tiny-llama");
  TrainingConfig c = TinyConfig();
  c.fine_tune = {.mode = FineTuneMode::kLora, .lora_rank = 4, .lora_alpha = 8};
  Trainer t(spec, c, {false, false}, {.seed = 1});
  t.Step();
  const fs::path dir = TempDir("peft");
  t.SaveWeights(dir);
  const SafetensorsFile adapter(dir / "adapter_model.safetensors");
  // q and v of 2 layers, A and B each.
  EXPECT_EQ(adapter.entries().size(), 8u);
  const auto& a = adapter.entries().at("base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{4, spec.hidden_size}));
  nlohmann::json config;
  std::ifstream(dir / "adapter_config.json") >> config;
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 8.0);
  EXPECT_EQ(config["target_modules"], (std::vector<std::string>{"q_proj", "v_proj"}));
  // The adapters saved are the trained ones (B moved away from its zero init).
  for (const auto& [name, p] : t.NamedParameters())
    if (name.find("lora_B") != std::string::npos) {
      EXPECT_TRUE(torch::equal(adapter.Read("base_model.model." + name), p.detach())) << name;
      EXPECT_GT(p.abs().sum().item<double>(), 0) << name;
    }
}

}  // namespace
}  // namespace headroom
