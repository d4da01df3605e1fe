// The `headroom` command end to end: the acceptance cases of the plan command, its JSON
// fields, and one-line errors with exit code 2 for bad input.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"

namespace headroom {
namespace {

nlohmann::json RunJson(const std::string& args) {
  const CommandResult r = RunCli(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(Cli, FullFp32Llama7bDoesNotFitOnA100) {
  const auto j = RunJson(
      "plan --model llama-2-7b --gpu a100-80gb --precision fp32 --optimizer adamw "
      "--micro-batch 1 --seq-len 512");
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_EQ(j["params"]["total"].get<int64_t>(), 6'738'415'616);
  // 16 bytes per parameter of weights, gradients and AdamW states alone exceed 80 GiB.
  EXPECT_GE(j["peak"]["allocated_bytes"].get<int64_t>(), 16 * 6'738'415'616);
  EXPECT_GT(j["peak"]["device_bytes"].get<int64_t>(), j["budget_bytes"].get<int64_t>());
}

TEST(Cli, LoraBf16Llama7bFitsOn4090WithCheckpointing) {
  const auto j = RunJson(
      "plan --model llama-2-7b --gpu rtx-4090 --precision bf16 --optimizer adamw --lora-rank 16 "
      "--lora-targets q,v --checkpoint all --micro-batch 1 --seq-len 512");
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["params"]["trainable"].get<int64_t>(), 32 * 2 * 2 * 16 * 4096);
  // bf16 base weights: 2 bytes per parameter.
  EXPECT_GE(j["breakdown"]["weights_bytes"].get<int64_t>(), 2 * 6'738'415'616);
  EXPECT_LE(j["peak"]["device_bytes"].get<int64_t>(), j["budget_bytes"].get<int64_t>());
  EXPECT_EQ(j["config"]["checkpointed_layers"].size(), 32u);
}

// Gemma 3 1B's 22 sliding layers (of 26) take transformers' window mask from its 512-token
// window on, and run another kernel there (head size 256: no cuDNN, and flash takes no
// mask); the report names it in text and JSON, and says nothing below the window.
TEST(Cli, SlidingLayersPastTheWindowAreReported) {
  const std::string base =
      "plan --model gemma-3-1b --gpu h100-80gb --precision bf16 --micro-batch 1 --seq-len ";
  const CommandResult below = RunCli(base + "511");
  const CommandResult past = RunCli(base + "512");
  ASSERT_EQ(below.exit_code, 0) << below.err;
  ASSERT_EQ(past.exit_code, 0) << past.err;
  EXPECT_EQ(below.out.find("sliding-window layers"), std::string::npos);
  EXPECT_NE(past.out.find("sliding-window layers (22 of 26): attention kernel memory-efficient"),
            std::string::npos)
      << past.out;
  const auto j = RunJson(base + "512");
  EXPECT_EQ(j["config"]["window_attention_kernel"], "memory-efficient");
  EXPECT_TRUE(RunJson(base + "511")["config"]["window_attention_kernel"].is_null());
}

TEST(Cli, JsonHasTheDocumentedFields) {
  const auto j = RunJson("plan --model tiny-gpt2 --device cpu --seq-len 64 --micro-batch 2");
  for (const char* key : {"fits", "budget_bytes"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["params"].contains("total"));
  EXPECT_TRUE(j["params"].contains("trainable"));
  for (const char* key : {"allocated_bytes", "reserved_bytes", "device_bytes", "phase"}) {
    EXPECT_TRUE(j["peak"].contains(key)) << key;
  }
  int64_t sum = 0;
  for (const char* key : {"weights_bytes", "weight_casts_bytes", "gradients_bytes",
                          "optimizer_bytes", "activations_bytes", "temporaries_bytes"}) {
    ASSERT_TRUE(j["breakdown"].contains(key)) << key;
    sum += j["breakdown"][key].get<int64_t>();
  }
  EXPECT_EQ(sum, j["peak"]["allocated_bytes"].get<int64_t>());
}

TEST(Cli, HfConfigAndYamlSpecsAreAccepted) {
  const auto j = RunJson(std::string("plan --model ") + HEADROOM_TEST_DATA_DIR +
                         "/tiny-llama-config.json --device cpu --seq-len 32");
  EXPECT_EQ(j["params"]["total"].get<int64_t>(),
            158'016);  // same architecture as the built-in tiny-llama
}

TEST(Cli, SimulateWritesCsvAndSvg) {
  const std::string dir = testing::TempDir();
  const CommandResult r = RunCli("simulate --model tiny-llama --device cpu --seq-len 32 --csv " +
                                 dir + "/t.csv --svg " + dir + "/t.svg");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  FILE* svg = fopen((dir + "/t.svg").c_str(), "r");
  ASSERT_NE(svg, nullptr);
  char head[5] = {};
  ASSERT_EQ(fread(head, 1, 4, svg), 4u);
  fclose(svg);
  EXPECT_EQ(std::string(head), "<svg");
}

struct MistypedCall {
  const char* args;
  const char* message;  // expected in the one-line error
};

class CliBadInput : public testing::TestWithParam<MistypedCall> {};

TEST_P(CliBadInput, OneLineErrorAndExitCode2) {
  const CommandResult r = RunCli(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    All, CliBadInput,
    testing::Values(
        MistypedCall{"plan --model llama-2-7 --gpu a100-80gb", "Did you mean: llama-2-7b"},
        MistypedCall{"plan --model gpt2 --gpu a100-80", "Did you mean: a100-80gb"},
        MistypedCall{"plan --model " HEADROOM_TEST_DATA_DIR "/malformed.yaml --device cpu",
                     "malformed YAML"},
        MistypedCall{"plan --model gpt2 --device cpu --micro-batch 0",
                     "--micro-batch must be a positive integer"},
        MistypedCall{"plan --model gpt2 --device cpu --seq-len -5",
                     "--seq-len must be a positive integer"},
        MistypedCall{"plan --model gpt2 --device cpu --seq-len 4096", "longer than gpt2 supports"},
        MistypedCall{"plan --model llama-2-7b --gpu a100-80gb --lora-rank 8 --lora-targets q,w",
                     "LoRA target 'w' does not exist"},
        MistypedCall{"plan --model llama-2-7b --gpu t4 --precision bf16",
                     "t4 does not support bf16"},
        MistypedCall{"plan --model gpt2 --gpu-mem 12parsecs", "unknown size unit"},
        MistypedCall{"plan --model gpt2 --device cpu --checkpoint layers:40",
                     "layer 40 does not exist"},
        MistypedCall{"plan --model gpt2", "say which device"},
        MistypedCall{"plan --gpu h100-80gb", "--model is required"}),
    [](const testing::TestParamInfo<MistypedCall>& p) { return "case" + std::to_string(p.index); });

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// Issue acceptance: the solver's plan for LoRA on a 24 GB card fits with the margin.
TEST(CliAuto, Llama3LoraOn4090FitsWithMargin) {
  const auto j = RunJson(
      "plan --auto --model llama-3-8b --gpu rtx-4090 --lora-rank 16 --seq-len 2048 --global-batch "
      "32");
  ASSERT_TRUE(j["fits"].get<bool>());
  const int64_t plan_mb = j["plan"]["micro_batch"].get<int64_t>();
  EXPECT_EQ(plan_mb * j["plan"]["grad_accum_steps"].get<int64_t>(), 32);
  EXPECT_LE(j["peak"]["device_bytes"].get<int64_t>(), j["solver"]["usable_bytes"].get<int64_t>());
  EXPECT_NEAR(static_cast<double>(j["solver"]["usable_bytes"].get<int64_t>()),
              0.95 * static_cast<double>(j["budget_bytes"].get<int64_t>()), 1.0);
  EXPECT_GT(j["estimate"]["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(j["estimate"]["step_seconds"].get<double>(), 0);
  EXPECT_TRUE(j["solver"].contains("seconds"));
  EXPECT_TRUE(j["plan"]["checkpointed_layers"].is_array());
  EXPECT_TRUE(j["plan"].contains("precision"));
}

TEST(CliAuto, InfeasibleRequestsGetRankedSuggestions) {
  const auto j =
      RunJson("plan --model llama-2-70b --gpu a100-80gb --seq-len 4096 --global-batch 16");
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_GT(j["solver"]["shortfall_bytes"].get<int64_t>(), 0);
  ASSERT_GE(j["suggestions"].size(), 3u);
  EXPECT_TRUE(j["suggestions"][0]["fits"].get<bool>());  // the fitting ones come first
  // 16 A100s cannot hold 70B's full states with activations, and no count that divides
  // the global batch of 16 is larger: QLoRA is the one change that fits.
  EXPECT_NE(j["suggestions"][0]["change"].get<std::string>().find("QLoRA"), std::string::npos);
}

// Issue 39: advice needs less than today's smallest plan, combines changes (bf16 with an
// 8-bit AdamW fits 8B full on one H100 where neither alone does), offers more GPUs
// first among the changes that fit, and never a "bigger" GPU of the same size (an
// A100-80GB to an H100 user).
TEST(CliAuto, AdviceIsSmallerAndInTheOrderPractitionersAccept) {
  const auto j = RunJson("plan --model llama-3-8b --gpu h100-80gb --seq-len 4096 --global-batch 8");
  ASSERT_FALSE(j["fits"].get<bool>());
  const int64_t today =
      j["solver"]["usable_bytes"].get<int64_t>() + j["solver"]["shortfall_bytes"].get<int64_t>();
  std::vector<std::string> fitting;
  bool combined = false, alone = false;
  for (const auto& s : j["suggestions"]) {
    const std::string change = s["change"];
    EXPECT_LT(s["peak_bytes"].get<int64_t>(), today) << change;
    EXPECT_EQ(change.find("a100-80gb"), std::string::npos) << change;
    if (s["fits"].get<bool>()) fitting.push_back(change);
    if (change.find("bf16 with 8-bit AdamW") == 0) combined = s["fits"].get<bool>();
    if (change.find("8-bit AdamW instead") == 0) alone = !s["fits"].get<bool>();
  }
  EXPECT_TRUE(combined);
  EXPECT_TRUE(alone);
  ASSERT_GE(fitting.size(), 2u);
  EXPECT_NE(fitting[0].find("GPUs"), std::string::npos) << fitting[0];
  EXPECT_NE(fitting[0].find("--sharding"), std::string::npos) << fitting[0];
  EXPECT_NE(fitting[1].find("8-bit AdamW"), std::string::npos) << fitting[1];
}

// A --gpu-mem budget is memory alone: no time is printed for it (issue 39: it once
// reported an A100's speed as if it were the user's GPU's).
TEST(CliAuto, AMemoryBudgetHasNoSpeedBasis) {
  const std::string request = "plan --model tiny-llama --gpu-mem 8GB --seq-len 64 --micro-batch 1";
  const CommandResult text = RunCli(request);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("estimate: none: a --gpu-mem budget has no speed basis"),
            std::string::npos)
      << text.out;
  EXPECT_TRUE(RunJson(request)["estimate"].is_null());
  EXPECT_FALSE(
      RunJson("plan --model tiny-llama --gpu h100-80gb --seq-len 64 --micro-batch 1")["estimate"]
          .is_null());
}

TEST(CliAuto, PlanFileAndExports) {
  const std::string path = testing::TempDir() + "/plan.yaml";
  const CommandResult r =
      RunCli("plan --model tiny-llama --device cpu --seq-len 64 --global-batch 8 -o " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  FILE* f = fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char head[256] = {};
  ASSERT_GT(fread(head, 1, sizeof(head) - 1, f), 0u);
  fclose(f);
  EXPECT_NE(std::string(head).find("headroom_plan_version: 1"), std::string::npos);

  const CommandResult hf = RunCli(
      "plan --model llama-3-8b --gpu rtx-4090 --lora-rank 16 --seq-len 2048 --global-batch 32 "
      "--emit hf");
  ASSERT_EQ(hf.exit_code, 0) << hf.err;
  const auto args = nlohmann::json::parse(hf.out);
  EXPECT_EQ(args["per_device_train_batch_size"].get<int64_t>() *
                args["gradient_accumulation_steps"].get<int64_t>(),
            32);
  EXPECT_TRUE(
      args["gradient_checkpointing"].get<bool>());  // partial checkpointing is not expressible
  EXPECT_NE(hf.err.find("all blocks or none"), std::string::npos);

  const CommandResult ds =
      RunCli("plan --model gpt2 --gpu a100-80gb --seq-len 1024 --global-batch 64 --emit deepspeed");
  ASSERT_EQ(ds.exit_code, 0) << ds.err;
  const auto config = nlohmann::json::parse(ds.out);
  EXPECT_EQ(config["train_batch_size"], 64);
  EXPECT_TRUE(config["bf16"]["enabled"].get<bool>());  // amp-bf16 becomes DeepSpeed's mixed bf16
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(CliAuto, StatedMicroBatchIsKeptForExports) {
  const CommandResult r = RunCli(
      "plan --model gpt2 --gpu a100-80gb --seq-len 1024 --micro-batch 8 --global-batch 64 --emit "
      "hf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto args = nlohmann::json::parse(r.out);
  EXPECT_EQ(args["per_device_train_batch_size"], 8);
  EXPECT_EQ(args["gradient_accumulation_steps"], 8);
  const CommandResult bad =
      RunCli("plan --model gpt2 --gpu a100-80gb --micro-batch 7 --global-batch 64 --auto");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("does not divide"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// transformers' grouped_mm experts keep one row per token-expert pair whatever the
// routing: the routing assumed is reported, and changes no byte.
TEST(CliMoe, RoutingIsReportedAndChangesNoMemory) {
  const std::string base =
      "plan --model qwen3-30b-a3b --gpu h200 --precision bf16 --lora-rank 16 --micro-batch 1 "
      "--seq-len 4096";
  const auto balanced = RunJson(base);
  const auto worst = RunJson(base + " --moe-routing worst-case");
  EXPECT_EQ(balanced["config"]["moe_routing"], "balanced");
  EXPECT_EQ(worst["config"]["moe_routing"], "worst-case");
  EXPECT_EQ(worst["peak"]["allocated_bytes"], balanced["peak"]["allocated_bytes"]);
  // 48 layers of 128 experts [2 * 768, 2048] and [2048, 768] in bf16, the router, attention
  // and embeddings: the 30,532,122,624 parameters transformers counts, plus LoRA on q, v.
  EXPECT_EQ(
      balanced["params"]["total"].get<int64_t>() - balanced["params"]["trainable"].get<int64_t>(),
      30'532'122'624);
  const auto dense = RunJson("plan --model llama-3.2-1b --gpu h200 --micro-batch 1");
  EXPECT_FALSE(dense["config"].contains("moe_routing"));
}

// torch.optim's foreach AdamW takes sqrt(exp_avg_sq) of every parameter at once: for a
// 7B full fine-tune one more fp32 copy of all 6,738,415,616 parameters, which moves the
// peak to the optimizer step. Fused and per-parameter implementations make no such copy.
TEST(CliStack, ForeachTemporariesShowAtTheOptimizerStep) {
  const std::string base =
      "plan --model llama-2-7b --gpu a100-80gb --precision amp-bf16 --micro-batch 1 --seq-len "
      "2048 --optimizer-impl ";
  const auto foreach = RunJson(base + "foreach");
  EXPECT_EQ(foreach["config"]["optimizer_impl"], "foreach");
  EXPECT_NE(foreach["peak"]["phase"].get<std::string>().find("optimizer step"), std::string::npos);
  // At least one fp32 copy of all 6,738,415,616 parameters' exp_avg_sq.
  EXPECT_GE(foreach["breakdown"]["temporaries_bytes"].get<int64_t>(), int64_t{4} * 6738415616);
  for (const char* impl : {"fused", "for-loop"}) {
    const auto other = RunJson(base + impl);
    EXPECT_EQ(other["config"]["optimizer_impl"], impl);
    EXPECT_LT(other["breakdown"]["temporaries_bytes"].get<int64_t>(), int64_t{1} << 30) << impl;
    EXPECT_LT(other["peak"]["allocated_bytes"].get<int64_t>(),
              foreach["peak"]["allocated_bytes"].get<int64_t>() - (int64_t{20} << 30));
  }
}

// The stack sets the implementation it runs: torch.optim picks foreach on CUDA and a
// per-parameter loop on the CPU; HF Trainer uses adamw_torch_fused.
TEST(CliStack, StackDefaultsAreRecorded) {
  const std::string base = "plan --model tiny-llama --seq-len 64 --micro-batch 1 ";
  EXPECT_EQ(RunJson(base + "--gpu a100-80gb")["config"]["optimizer_impl"], "foreach");
  EXPECT_EQ(RunJson(base + "--device cpu")["config"]["optimizer_impl"], "for-loop");
  EXPECT_EQ(RunJson(base + "--gpu a100-80gb --stack hf-trainer")["config"]["optimizer_impl"],
            "fused");
  const auto lora = RunJson(base +
                            "--device cpu --precision amp-bf16 --lora-rank 8 "
                            "--base-dtype fp32 --cpu-bf16 emulated");
  EXPECT_EQ(lora["config"]["base_dtype"], "fp32");
  EXPECT_EQ(lora["config"]["cpu_bf16"], "emulated");
  EXPECT_EQ(lora["config"]["stack"], "pytorch");
  // An fp32 base holds the frozen weights in 4 bytes instead of 2.
  const auto bf16_base = RunJson(base +
                                 "--device cpu --precision amp-bf16 --lora-rank 8 "
                                 "--cpu-bf16 emulated");
  EXPECT_GT(lora["breakdown"]["weights_bytes"].get<int64_t>(),
            bf16_base["breakdown"]["weights_bytes"].get<int64_t>());
  const CommandResult full = RunCli(base + "--device cpu --base-dtype fp32");
  EXPECT_EQ(full.exit_code, 2);
}

// The long-sequence techniques change the plan and are named where it is shown: the JSON's
// config and peak, and capacity's header.
TEST(Cli, LongSequenceTechniquesArePlannedAndNamed) {
  const std::string base =
      "plan --model tiny-llama --gpu h100-80gb --seq-len 256 --micro-batch 2 --lora-rank 8 "
      "--checkpoint all --json ";
  const auto full = RunJson(base);
  const auto chunked = RunJson(base + "--loss chunked:128 --activation-offload");
  EXPECT_EQ(full["config"]["loss"], "full");
  EXPECT_EQ(chunked["config"]["loss"], "chunked:128");
  EXPECT_EQ(chunked["config"]["activation_offload"], true);
  EXPECT_EQ(full["peak"]["host_pinned_bytes"], 0);
  // Two checkpointed blocks, each input [2, 256, 64] in bf16: 64 KiB, already a power of two.
  EXPECT_EQ(chunked["peak"]["host_pinned_bytes"], 2 * 65536);
  EXPECT_LT(chunked["peak"]["allocated_bytes"].get<int64_t>(),
            full["peak"]["allocated_bytes"].get<int64_t>());
  const CommandResult capacity = RunCli(
      "capacity --model tiny-llama --tokens 1e6 --seq-len 256 --lora-rank 8 --gpu-types "
      "h100-80gb --max-gpus 1 --loss chunked:128 --activation-offload");
  ASSERT_EQ(capacity.exit_code, 0) << capacity.err;
  EXPECT_NE(capacity.out.find("loss chunked:128, activation offload"), std::string::npos)
      << capacity.out;
}

}  // namespace
}  // namespace headroom
