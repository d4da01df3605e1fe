#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>

#include "models/catalog.h"
#include "planner/plan/plan_file.h"
#include "planner/report/stack_exports.h"

namespace headroom {
namespace {

PlanFile SamplePlan() {
  PlanFile p;
  p.model = *LoadCatalogModel("qwen2.5-0.5b");
  p.device = "rtx-4090";
  p.device_memory_bytes = 24564LL << 20;
  p.config.micro_batch = 4;
  p.config.grad_accum_steps = 8;
  p.config.seq_len = 2048;
  p.config.precision = Precision::kAmpBf16;
  p.config.optimizer = OptimizerKind::kAdamW8bit;
  p.config.fine_tune = {.mode = FineTuneMode::kLora,
                        .lora_rank = 16,
                        .lora_alpha = 32,
                        .lora_dropout = 0.05,
                        .lora_targets = {"q", "v"}};
  p.config.checkpoint = *CheckpointPolicy::Parse("layers:0,1,2,7");
  p.global_batch = 32;
  p.margin = 0.05;
  p.fits = true;
  p.allocated_bytes = 123456789;
  p.reserved_bytes = 133456789;
  p.device_bytes = 553456789;
  p.peak_phase = "step 2, backward, micro-batch 8/8, log_softmax";
  p.breakdown_bytes = {{"weights", 1000}, {"activations", 2000}};
  p.step_seconds = 1.0 / 3.0;
  p.tokens_per_second = 196608.123456789;
  return p;
}

TEST(PlanFile, RoundTripsExactly) {
  const PlanFile p = SamplePlan();
  auto back = ParsePlanYaml(WritePlanYaml(p), "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == p);
  EXPECT_EQ(back->step_seconds, p.step_seconds);  // bit-exact double
  EXPECT_EQ(WritePlanYaml(*back), WritePlanYaml(p));
}

// A mixture of experts' four fields travel with its plan (and only with one: a dense
// model's plan file has none of them).
TEST(PlanFile, MixtureOfExpertsRoundTrips) {
  EXPECT_EQ(WritePlanYaml(SamplePlan()).find("num_experts"), std::string::npos);
  for (const char* name : {"qwen3-30b-a3b", "mixtral-8x7b", "tiny-qwen3-moe", "tiny-mixtral"}) {
    PlanFile p = SamplePlan();
    auto model = LoadCatalogModel(name);
    ASSERT_TRUE(model.ok()) << model.error().message;
    p.model = *model;
    const std::string text = WritePlanYaml(p);
    EXPECT_NE(text.find(fmt::format("num_experts: {}\n", model->num_experts)), std::string::npos)
        << text;
    EXPECT_NE(text.find(fmt::format("num_experts_per_tok: {}\n", model->num_experts_per_tok)),
              std::string::npos);
    EXPECT_NE(text.find(fmt::format("moe_intermediate_size: {}\n", model->moe_intermediate_size)),
              std::string::npos);
    EXPECT_NE(text.find("norm_topk_prob: true\n"), std::string::npos);
    auto back = ParsePlanYaml(text, "plan.yaml");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_TRUE(*back == p) << name;
    EXPECT_EQ(WritePlanYaml(*back), text);
  }
  // norm_topk_prob false (Qwen3MoeConfig's default) round-trips too.
  PlanFile p = SamplePlan();
  p.model = *LoadCatalogModel("tiny-qwen3-moe");
  p.model.norm_topk_prob = false;
  auto back = ParsePlanYaml(WritePlanYaml(p), "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_FALSE(back->model.norm_topk_prob);
  EXPECT_TRUE(*back == p);
}

// The stack a plan was made for travels with it; a plan file from before stacks were
// recorded was made for headroom's own runtime.
TEST(PlanFile, RecordsTheStackAndItsChoices) {
  PlanFile p = SamplePlan();
  p.config.stack = Stack::kHfTrainer;
  p.config.optimizer_impl = OptimizerImpl::kForeach;
  p.config.base_dtype = DType::kF32;
  const std::string text = WritePlanYaml(p);
  EXPECT_NE(text.find("stack: hf-trainer"), std::string::npos);
  EXPECT_NE(text.find("optimizer_impl: foreach"), std::string::npos);
  EXPECT_NE(text.find("base_dtype: fp32"), std::string::npos);
  auto back = ParsePlanYaml(text, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == p);

  std::string old = WritePlanYaml(SamplePlan());
  const std::string line = "  stack: pytorch\n";
  ASSERT_NE(old.find(line), std::string::npos);
  old.erase(old.find(line), line.size());
  auto legacy = ParsePlanYaml(old, "old.yaml");
  ASSERT_TRUE(legacy.ok()) << legacy.error().message;
  EXPECT_EQ(legacy->config.stack, Stack::kHeadroom);
  EXPECT_FALSE(legacy->config.optimizer_impl.has_value());
}

// A chunked loss travels with its plan (absent: the full loss), its tile included.
TEST(PlanFile, LossRoundTrip) {
  EXPECT_EQ(WritePlanYaml(SamplePlan()).find("loss"), std::string::npos);
  PlanFile p = SamplePlan();
  p.config.loss = *LossConfig::Parse("chunked:4096");
  const std::string text = WritePlanYaml(p);
  EXPECT_NE(text.find("loss: chunked:4096"), std::string::npos) << text;
  auto back = ParsePlanYaml(text, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == p);
  EXPECT_EQ(back->config.loss.vocab_tile, 4096);
  std::string bad = text;
  bad.replace(bad.find("chunked:4096"), 12, "chunked:-1");
  EXPECT_FALSE(ParsePlanYaml(bad, "plan.yaml").ok());
}

// Activation offload travels with its plan (absent: off).
TEST(PlanFile, ActivationOffloadRoundTrip) {
  EXPECT_EQ(WritePlanYaml(SamplePlan()).find("activation_offload"), std::string::npos);
  PlanFile p = SamplePlan();
  p.config.activation_offload = true;
  const std::string text = WritePlanYaml(p);
  EXPECT_NE(text.find("activation_offload: true"), std::string::npos) << text;
  auto back = ParsePlanYaml(text, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == p);
}

// Padding-free rows travel with their plan (absent: padded); an unknown packing is refused.
TEST(PlanFile, PackingRoundTrip) {
  EXPECT_EQ(WritePlanYaml(SamplePlan()).find("packing"), std::string::npos);
  PlanFile p = SamplePlan();
  p.config.packing = Packing::kPaddingFree;
  const std::string text = WritePlanYaml(p);
  EXPECT_NE(text.find("packing: padding-free"), std::string::npos) << text;
  auto back = ParsePlanYaml(text, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == p);
  std::string bad = text;
  bad.replace(bad.find("padding-free"), 12, "bin-packed");
  EXPECT_FALSE(ParsePlanYaml(bad, "plan.yaml").ok());
}

// The kernel packages an imported graph was recorded with travel with its plan; an unknown
// one is refused as the flag refuses it.
TEST(PlanFile, KernelPackagesRoundTrip) {
  EXPECT_EQ(WritePlanYaml(SamplePlan()).find("kernel_packages"), std::string::npos);
  PlanFile p = SamplePlan();
  p.config.kernel_packages = {"fla"};
  const std::string text = WritePlanYaml(p);
  EXPECT_NE(text.find("kernel_packages: [fla]"), std::string::npos) << text;
  auto back = ParsePlanYaml(text, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == p);
  std::string unknown = text;
  unknown.replace(unknown.find("[fla]"), 5, "[liger]");
  auto refused = ParsePlanYaml(unknown, "plan.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("--kernels liger"), std::string::npos)
      << refused.error().message;
}

TEST(PlanFile, NewerVersionAndCorruptionAreClearErrors) {
  std::string text = WritePlanYaml(SamplePlan());
  std::string newer = text;
  newer.replace(newer.find("headroom_plan_version: 1"), 24, "headroom_plan_version: 7");
  auto r = ParsePlanYaml(newer, "plan.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("newer headroom"), std::string::npos) << r.error().message;

  auto truncated = ParsePlanYaml(text.substr(0, text.find("training:")), "plan.yaml");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().message.find("missing field 'training'"), std::string::npos)
      << truncated.error().message;

  std::string garbled = text;
  garbled.replace(garbled.find("micro_batch: 4"), 14, "micro_batch: [");
  EXPECT_FALSE(ParsePlanYaml(garbled, "plan.yaml").ok());

  std::string bad_value = text;
  bad_value.replace(bad_value.find("micro_batch: 4"), 14, "micro_batch: x");
  auto bad = ParsePlanYaml(bad_value, "plan.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("micro_batch"), std::string::npos) << bad.error().message;

  EXPECT_FALSE(ParsePlanYaml("just: a map", "plan.yaml").ok());
}

// fuzz/plan_file_fuzzer.cc found a breakdown key of bytes that are not UTF-8: read, then
// written back escaped, it read back as another plan. Such a file is refused.
TEST(PlanFile, TextThatIsNotUtf8IsRefused) {
  const std::string text = WritePlanYaml(SamplePlan());
  for (const std::string& from : {std::string("weights:"), std::string("qwen2.5-0.5b")}) {
    std::string bad = text;
    bad.insert(bad.find(from) + 2, "\xff\xa1");
    const auto r = ParsePlanYaml(bad, "plan.yaml");
    ASSERT_FALSE(r.ok()) << from;
    EXPECT_EQ(r.error().message, "plan.yaml: not UTF-8 text");
  }
  std::string accented = text;  // UTF-8 is fine, and round-trips
  accented.replace(accented.find("log_softmax"), 11, "log_softmax \u00e9t\u00e9");
  const auto ok = ParsePlanYaml(accented, "plan.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ParsePlanYaml(WritePlanYaml(*ok), "again.yaml")->peak_phase, ok->peak_phase);
}

TEST(StackExports, HuggingFaceAndDeepSpeedFields) {
  TrainingConfig c;
  c.micro_batch = 4;
  c.grad_accum_steps = 8;
  c.precision = Precision::kAmpBf16;
  const auto hf = HfTrainingArguments(c, true);
  EXPECT_EQ(hf["per_device_train_batch_size"], 4);
  EXPECT_EQ(hf["gradient_accumulation_steps"], 8);
  EXPECT_EQ(hf["gradient_checkpointing"], true);
  EXPECT_EQ(hf["bf16"], true);
  EXPECT_EQ(hf["fp16"], false);
  EXPECT_EQ(hf["optim"], "adamw_torch");

  c.precision = Precision::kMixedFp16;
  const auto ds = DeepSpeedConfig(c, 64);
  EXPECT_EQ(ds["train_batch_size"], 64);
  EXPECT_EQ(ds["train_micro_batch_size_per_gpu"], 4);
  EXPECT_EQ(ds["gradient_accumulation_steps"], 8);
  EXPECT_EQ(ds["fp16"]["enabled"], true);
  EXPECT_EQ(ds["fp16"]["initial_scale_power"], 16);
  EXPECT_EQ(ds["fp16"]["loss_scale_window"], 2000);
  EXPECT_EQ(ds["zero_optimization"]["stage"], 0);
}

// Found by scripts/fuzz.sh (plan_file, 2026-12-04): a NUL inside a phase name read, but
// did not write back as it was read, so the plan could not be read again. YAML allows no
// C0 control but tab and line breaks: the file is refused, naming the line and the byte.
// Without the NUL, the same file reads, writes back and reads again to the same text.
TEST(PlanFile, ControlCharactersAreRefusedAndWhatReadsWritesBack) {
  const std::string path = std::string(HEADROOM_TEST_DATA_DIR) + "/plan_fuzz_roundtrip.yaml";
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t nul = text.find('\0');
  ASSERT_NE(nul, std::string::npos) << path;
  const Result<PlanFile> refused = ParsePlanYaml(text, "plan.yaml");
  ASSERT_FALSE(refused.ok());
  const auto line = std::count(text.begin(), text.begin() + nul, '\n') + 1;
  EXPECT_EQ(refused.error().message.find(fmt::format("plan.yaml:{}: a control character (byte "
                                                     "0x00)",
                                                     line)),
            0u)
      << refused.error().message;
  text.erase(nul, 1);
  const Result<PlanFile> plan = ParsePlanYaml(text, "plan.yaml");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const std::string written = WritePlanYaml(*plan);
  const Result<PlanFile> again = ParsePlanYaml(written, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.error().message << "\n" << written;
  EXPECT_EQ(WritePlanYaml(*again), written);
}

}  // namespace
}  // namespace headroom
