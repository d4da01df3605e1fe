// Bad input never gives a wrong answer: a table of inputs a user (or a fuzzer) might
// hand `headroom`, each of which must end with exactly one line, `headroom: error: ...`,
// naming the flag or file at fault, and exit code 2 (bad input) — never a FITS, a
// wrapped size, a hang, an uncaught exception or a backtrace. Covers wrapped sizes,
// budgets below the CUDA context, unbounded work, files that are not regular files,
// writes that cannot succeed, flags that conflict or would be ignored, and malformed
// model specs, HF configs, plan files, weights, token files and training states.
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli_runner.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;

// Fixture files, made once per test process; "{d}" in a case's arguments names the dir.
const std::string& FixtureDir() {
  static const std::string dir = [] {
    const std::string d = testing::TempDir() + "/headroom_bad_input_" + std::to_string(getpid());
    fs::remove_all(d);
    fs::create_directories(d + "/a-directory");
    fs::create_directories(d + "/dir-config/config.json");  // a directory named config.json
    const auto write = [&](const std::string& name, const std::string& text) {
      std::ofstream(d + "/" + name, std::ios::binary) << text;
    };
    const std::string llama =
        "family: llama\nvocab_size: 512\nhidden_size: 64\nnum_layers: 2\nnum_heads: 4\n"
        "max_positions: 256\nintermediate_size: 176\n";
    const auto spec = [&](const std::string& name, const std::string& replace,
                          const std::string& with) {
      std::string text = llama;
      text.replace(text.find(replace), replace.size(), with);
      write(name, text);
    };
    spec("vocab-2-62.yaml", "vocab_size: 512", "vocab_size: 4611686018427387904");
    spec("hidden-2-40.yaml", "hidden_size: 64", "hidden_size: 1099511627776");
    spec("layers-1e9.yaml", "num_layers: 2", "num_layers: 1000000000");
    spec("layers-1e6.yaml", "num_layers: 2", "num_layers: 1000000");
    spec("layers-negative.yaml", "num_layers: 2", "num_layers: -4");
    spec("heads-2-20.yaml", "num_heads: 4", "num_heads: 1048576");
    spec("mlp-2-62.yaml", "intermediate_size: 176", "intermediate_size: 4611686018427387904");
    spec("positions-2-62.yaml", "max_positions: 256", "max_positions: 4611686018427387904");
    spec("vocab-2-64.yaml", "vocab_size: 512", "vocab_size: 18446744073709551616");
    spec("eps-nan.yaml", "intermediate_size: 176", "intermediate_size: 176\nnorm_eps: .nan");
    spec("eps-inf.yaml", "intermediate_size: 176", "intermediate_size: 176\nnorm_eps: .inf");
    spec("dropout-nan.yaml", "intermediate_size: 176",
         "intermediate_size: 176\nattention_dropout: .nan");
    spec("dropout-1.5.yaml", "intermediate_size: 176",
         "intermediate_size: 176\nattention_dropout: 1.5");
    spec("theta-inf.yaml", "intermediate_size: 176", "intermediate_size: 176\nrope_theta: .inf");
    spec("kv-heads-negative.yaml", "intermediate_size: 176",
         "intermediate_size: 176\nnum_kv_heads: -1");
    spec("head-dim-2-40.yaml", "intermediate_size: 176",
         "intermediate_size: 176\nhead_dim: 1099511627776");
    spec("unknown-field.yaml", "intermediate_size: 176", "intermediate_size: 176\nsparkle: 3");
    spec("unknown-family.yaml", "family: llama", "family: mamba");
    // Every size within its bound, the whole too large: 65536 heads of 65536 dims.
    write("params-2-64.yaml",
          "family: llama\nvocab_size: 512\nhidden_size: 1048576\nnum_layers: 4096\n"
          "num_heads: 65536\nhead_dim: 65536\nmax_positions: 256\nintermediate_size: 1048576\n");
    // 2^20 sequences of 2^24 tokens: every size within its bound, the step past 2^64 bytes.
    write("long-context.yaml",
          "family: llama\nvocab_size: 32000\nhidden_size: 4096\nnum_layers: 64\n"
          "num_heads: 32\nmax_positions: 16777216\nintermediate_size: 14336\n");
    write("every-dim-huge.yaml",
          "family: gpt2\nvocab_size: 9223372036854775807\nhidden_size: 9223372036854775807\n"
          "num_layers: 9223372036854775807\nnum_heads: 1\nmax_positions: 9223372036854775807\n");
    write("map-key.yaml", "{}:\n");
    write("a-list.yaml", "- 1\n- 2\n");
    write("empty.yaml", "");
    const std::string hf =
        "{\"model_type\": \"gpt2\", \"vocab_size\": 512, \"n_embd\": 64, \"n_layer\": 2, "
        "\"n_head\": 4, \"n_positions\": 256}";
    const auto config = [&](const std::string& name, const std::string& replace,
                            const std::string& with) {
      std::string text = hf;
      text.replace(text.find(replace), replace.size(), with);
      write(name, text);
    };
    config("n-embd-2-62.json", "\"n_embd\": 64", "\"n_embd\": 4611686018427387904");
    config("1e400.json", "\"vocab_size\": 512", "\"vocab_size\": 1e400");
    config("vocab-u64.json", "\"vocab_size\": 512", "\"vocab_size\": 18446744073709551615");
    config("vocab-2-62.json", "\"vocab_size\": 512", "\"vocab_size\": 4611686018427387904");
    config("layers-1e6.json", "\"n_layer\": 2", "\"n_layer\": 1000000");
    config("model-type.json", "\"gpt2\"", "\"mamba\"");
    config("string-size.json", "\"n_embd\": 64", "\"n_embd\": \"64\"");
    config("missing-field.json", "\"n_head\": 4, ", "");
    config("n-inner-negative.json", "\"n_embd\": 64", "\"n_embd\": 64, \"n_inner\": -1");
    write("truncated.json", hf.substr(0, 40));
    write("a-list.json", "[1, 2]");
    write("rope.json",
          "{\"model_type\": \"llama\", \"vocab_size\": 512, \"hidden_size\": 64, "
          "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 176, "
          "\"max_position_embeddings\": 256, \"rope_scaling\": {\"rope_type\": \"llama3\", "
          "\"original_max_position_embeddings\": 1e300}}");
    // The 2026 families' fields (issue 20): Qwen3 and Phi-3 configs with one bad value.
    const std::string decoder =
        "\"vocab_size\": 512, \"hidden_size\": 64, \"num_hidden_layers\": 2, "
        "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 176, "
        "\"max_position_embeddings\": 256, ";
    write("qwen3-window.json",
          "{\"model_type\": \"qwen3\", " + decoder + "\"use_sliding_window\": true}");
    write("qwen3-head-dim.json",
          "{\"model_type\": \"qwen3\", " + decoder + "\"head_dim\": 4611686018427387904}");
    write("qwen3-bias.json",
          "{\"model_type\": \"qwen3\", " + decoder + "\"attention_bias\": true}");
    write("phi3-window.json",
          "{\"model_type\": \"phi3\", " + decoder + "\"sliding_window\": 4611686018427387904}");
    write("phi3-rotary.json",
          "{\"model_type\": \"phi3\", " + decoder + "\"partial_rotary_factor\": 0.5}");
    write("phi3-longrope.json",
          "{\"model_type\": \"phi3\", " + decoder + "\"rope_scaling\": {\"type\": \"longrope\"}}");
    // Mixtures of experts: configs with what is not modelled, a spec routing each token
    // to more experts than it has.
    write("qwen3-moe-sparse-step.json",
          "{\"model_type\": \"qwen3_moe\", " + decoder + "\"decoder_sparse_step\": 2}");
    write("qwen3-moe-dense-layers.json",
          "{\"model_type\": \"qwen3_moe\", " + decoder + "\"mlp_only_layers\": [1]}");
    write("qwen3-moe-router-logits.json",
          "{\"model_type\": \"qwen3_moe\", " + decoder + "\"output_router_logits\": true}");
    write("qwen3-moe-top-k.json", "{\"model_type\": \"qwen3_moe\", " + decoder +
                                      "\"num_experts\": 4, \"num_experts_per_tok\": 8}");
    write("mixtral-jitter.json",
          "{\"model_type\": \"mixtral\", " + decoder + "\"router_jitter_noise\": 0.01}");
    write("mixtral-router-logits.json",
          "{\"model_type\": \"mixtral\", " + decoder + "\"output_router_logits\": true}");
    write("moe-top-k.yaml",
          "family: qwen3_moe\nvocab_size: 512\nhidden_size: 64\nnum_layers: 2\nnum_heads: 4\n"
          "max_positions: 256\nintermediate_size: 176\nnum_experts: 4\nnum_experts_per_tok: 8\n"
          "moe_intermediate_size: 48\n");
    spec("llama-experts.yaml", "intermediate_size: 176",
         "intermediate_size: 176\nnum_experts_per_tok: 2");
    write("garbage.yaml", "headroom_plan_version: 1\nmodel: [\n");
    write("garbage.bin", "this is not a safetensors file at all");
    write("odd.bin", "abc");
    write("zero-header.safetensors", std::string(8, '\0'));
    // A file past the 16 MiB a model spec may have (sparse: no disk used).
    write("big.yaml", "");
    fs::resize_file(d + "/big.yaml", uintmax_t{64} << 20);
    for (const char* fifo :
         {"fifo.yaml", "fifo.json", "fifo-plan.yaml", "fifo.safetensors", "fifo.bin", "fifo.state"})
      mkfifo((d + "/" + fifo).c_str(), 0600);
    return d;
  }();
  return dir;
}

// A valid plan file, and the same with a wrapped size and a NaN: made only for the
// cases that read one (running `plan` costs a LibTorch load in a full build).
void WritePlanFixtures() {
  static const bool written = [] {
    const std::string d = FixtureDir();
    RunCli(
        "plan --model tiny-gpt2 --device cpu --micro-batch 1 --seq-len 32 --precision fp32 "
        "-o " +
        d + "/p.yaml");
    std::ifstream in(d + "/p.yaml");
    const std::string plan((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto variant = [&](const std::string& name, const std::string& replace,
                             const std::string& with) {
      std::string text = plan;
      if (text.find(replace) != std::string::npos)
        text.replace(text.find(replace), replace.size(), with);
      std::ofstream(d + "/" + name, std::ios::binary) << text;
    };
    variant("huge-plan.yaml", "micro_batch: 1", "micro_batch: 4611686018427387904");
    variant("nan-plan.yaml", "lora_alpha: 32", "lora_alpha: .nan");
    return true;
  }();
  (void)written;
}

struct BadInput {
  std::string args;   // "{d}" stands for the fixture directory
  std::string names;  // the flag or file the one-line error must name
  int exit_code = 2;
};

void PrintTo(const BadInput& in, std::ostream* out) { *out << "headroom " << in.args; }

std::string Expand(std::string text) {
  for (size_t at; (at = text.find("{d}")) != std::string::npos;) text.replace(at, 3, FixtureDir());
  return text;
}

class CliBadInputTable : public testing::TestWithParam<BadInput> {};

TEST_P(CliBadInputTable, OneLineErrorNamingTheFlagOrFile) {
  const BadInput& in = GetParam();
  if (in.args.find("/p.yaml") != std::string::npos ||
      in.args.find("-plan.yaml") != std::string::npos)
    WritePlanFixtures();
  const CommandResult r = RunCli(Expand(in.args));
  EXPECT_EQ(r.exit_code, in.exit_code) << r.err;
  const std::string prefix = "headroom: error: ";
  EXPECT_EQ(r.err.compare(0, prefix.size(), prefix), 0) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line:\n" << r.err;
  EXPECT_NE(r.err.find(Expand(in.names)), std::string::npos) << r.err;
  // Bad input gets no answer; a write that fails (exit 1) comes after the report.
  if (in.exit_code == 2) {
    EXPECT_EQ(r.out.find("FITS"), std::string::npos) << r.out;
  }
}

const std::string kPlan = "plan --model tiny-llama --gpu a100-80gb --seq-len 64 ";
const std::string kFixed = kPlan + "--micro-batch 2 ";

std::vector<BadInput> PlanCases() {
  return {
      // Sizes that would wrap, or are past a bound: never clamped.
      {kPlan + "--micro-batch 4611686018427387904", "--micro-batch"},
      {kPlan + "--micro-batch 18446744073709551616", "--micro-batch"},
      {kPlan + "--micro-batch 99999999999999999999999", "--micro-batch"},
      {kPlan + "--micro-batch 1048577", "--micro-batch"},
      {kPlan + "--micro-batch 0", "--micro-batch"},
      {kPlan + "--micro-batch -1", "--micro-batch"},
      // capacity sweeps the GPU and the count; the job's length is required, once.
      {"capacity --model tiny-llama --gpu a100-80gb --tokens 1e6", "--gpu"},
      {"capacity --model tiny-llama --gpus 4 --tokens 1e6", "--gpus"},
      {"capacity --model tiny-llama", "--tokens"},
      {"capacity --model tiny-llama --tokens 1e6 --dataset-tokens 1e6", "--tokens"},
      {"capacity --model tiny-llama --tokens 1e6 --epochs 2", "--epochs"},
      {"capacity --model tiny-llama --tokens 0", "--tokens"},
      {"capacity --model tiny-llama --tokens nan", "--tokens"},
      {"capacity --model tiny-llama --tokens 1e6 --prices /nonexistent.yaml", "--prices"},
      {"capacity --model tiny-llama --seq-len 64 --tokens 1e6 --gpu-types h100-80gb,nope", "nope"},
      {"capacity --model tiny-llama --tokens 1e6 --max-hours -1", "--max-hours"},
      {kPlan + "--micro-batch 0x10", "--micro-batch"},
      {kPlan + "--micro-batch +4", "--micro-batch"},
      {kPlan + "--micro-batch 1e3", "--micro-batch"},
      {kPlan + "--micro-batch 2.5", "--micro-batch"},
      {kPlan + "--micro-batch four", "--micro-batch"},
      {kFixed + "--grad-accum 2147483648", "--grad-accum"},
      {kFixed + "--grad-accum 2147483647", "--grad-accum"},
      {kFixed + "--grad-accum 18446744073709551616", "--grad-accum"},
      {kFixed + "--grad-accum 0", "--grad-accum"},
      {kFixed + "--grad-accum -2", "--grad-accum"},
      {kFixed + "--lora-rank 9223372036854775807", "--lora-rank"},
      {kFixed + "--lora-rank 65537", "--lora-rank"},
      {kFixed + "--lora-rank 0", "--lora-rank"},
      {kFixed + "--lora-rank -3", "--lora-rank"},
      {"plan --model tiny-llama --gpu a100-80gb --micro-batch 1 --seq-len 9223372036854775807",
       "--seq-len"},
      {"plan --model tiny-llama --gpu a100-80gb --micro-batch 1 --seq-len 0", "--seq-len"},
      {"plan --model tiny-llama --gpu a100-80gb --micro-batch 1 --seq-len 12abc", "--seq-len"},
      {"plan --model tiny-llama --gpu a100-80gb --micro-batch 1 --seq-len 1.5", "--seq-len"},
      {"plan --model tiny-llama --gpu a100-80gb --micro-batch 1 --seq-len 4096", "--seq-len"},
      {"plan --model tiny-qwen3-moe --device cpu --micro-batch 1 --moe-routing capacity:1.25",
       "no stack headroom plans for has one"},
      {"plan --model tiny-qwen3-moe --device cpu --micro-batch 1 --moe-routing capacity:0",
       "--moe-routing capacity:F"},
      {"plan --model tiny-qwen3-moe --device cpu --micro-batch 1 --moe-routing even",
       "--moe-routing even"},
      {kPlan + "--moe-routing balanced", "not a mixture of experts"},
      {kPlan + "--images 1", "built graph, which has no vision tower"},
      {kPlan + "--images -1", "--images"},
      {kPlan + "--images 1025", "--images"},
      {kPlan + "--kernels fla", "--kernels fla: tiny-llama is planned by a built graph"},
      {kPlan + "--loss chunked:0", "--loss 'chunked:0': N must be a positive integer"},
      {kPlan + "--loss chunked:16777217", "--loss chunked:N"},
      {kPlan + "--loss tiled", "--loss 'tiled'"},
      {kPlan + "--packing padding-free", "needs --tokens-per-micro-batch T"},
      {kPlan + "--activation-offload --stack headroom", "keeps activations on the device"},
      {kPlan + "--activation-offload --gpus 2 --emit hf", "with --emit hf name --sharding"},
      {"plan --model tiny-llama --device cpu --seq-len 64 --activation-offload",
       "on --device cpu they are in host memory already"},
      {kPlan + "--tokens-per-micro-batch 64", "applies to --packing padding-free"},
      {kPlan + "--packing packed", "--packing"},
      {kPlan + "--packing padding-free --tokens-per-micro-batch 0", "--tokens-per-micro-batch"},
      {kFixed + "--packing padding-free --tokens-per-micro-batch 64", "--micro-batch 2 is not 1"},
      {kPlan + "--packing padding-free --tokens-per-micro-batch 64 --attention eager",
       "with --attention eager is not modelled"},
      {kPlan + "--packing padding-free --tokens-per-micro-batch 64 --stack headroom",
       "trains padded rows"},
      {"plan --model tiny-gpt2 --device cpu --seq-len 64 --packing padding-free "
       "--tokens-per-micro-batch 64",
       "tiny-gpt2 is not one"},
      {kPlan + "--loss chunked --emit hf", "--emit hf writes a stack that computes the model's"},
      {kPlan + "--loss chunked --stack headroom", "headroom's runtime (--stack headroom)"},
      {"plan --model tiny-bert --device cpu --micro-batch 1 --seq-len 64 --loss chunked",
       "is a sequence classifier"},
      {kFixed + "--loss chunked --gpus 2 --sharding fsdp",
       "--loss chunked with --sharding fsdp is not modelled"},
      {kFixed + "--loss chunked --gpus 2 --sharding zero3",
       "--loss chunked with --sharding zero3 is not modelled"},
      {kPlan + "--kernels liger", "--kernels liger: the kernel packages planned are fla"},
      {kPlan + "--kernels fla,triton", "--kernels triton: the kernel packages planned"},
      {"plan --model tiny-mixtral --device cpu --micro-batch 1 --seq-len 64 --lora-targets "
       "gate_proj",
       "mixtures of experts"},
      {kPlan + "--global-batch -1", "--global-batch"},
      {kPlan + "--global-batch 0", "--global-batch"},
      {kPlan + "--global-batch 18446744073709551616", "--global-batch"},
      {kPlan + "--global-batch 1048577", "--global-batch"},
      {kPlan + "--auto --micro-batch 1048576 --grad-accum 1048576", "--grad-accum"},
      {kPlan + "--auto --micro-batch 7 --global-batch 64", "--micro-batch 7"},
      // Byte sizes: at least one byte, at most 64 bits, a number and a unit.
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 18446744073709551616", "64 bits"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 10000000TB", "64 bits"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 0.4B", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 0", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem -5GiB", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem nan", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem inf", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 1.2.3GB", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 1e3GB", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem ''", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 24GiBs", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 12parsecs", "--gpu-mem"},
      // A budget the CUDA context alone exceeds cannot leave headroom.
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 400MiB", "--gpu-mem 400MiB"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 1B", "--gpu-mem 1B"},
      {"plan --model tiny-llama --micro-batch 1 --gpu-mem 100MB", "--gpu-mem 100MB"},
      // Reals: finite and within range.
      {kPlan + "--margin nan", "--margin"},
      {kPlan + "--margin inf", "--margin"},
      {kPlan + "--margin -0.1", "--margin"},
      {kPlan + "--margin 0.9", "--margin"},
      {kPlan + "--margin 1e-400", "--margin"},
      {kPlan + "--margin half", "--margin"},
      {kFixed + "--lora-rank 8 --lora-alpha nan", "--lora-alpha"},
      {kFixed + "--lora-rank 8 --lora-alpha 0", "--lora-alpha"},
      {kFixed + "--lora-rank 8 --lora-alpha -16", "--lora-alpha"},
      {kFixed + "--lora-rank 8 --lora-dropout 1", "--lora-dropout"},
      {kFixed + "--lora-rank 8 --lora-dropout -0.1", "--lora-dropout"},
      {kFixed + "--lora-rank 8 --lora-dropout inf", "--lora-dropout"},
      // Flags that conflict, or that would be ignored.
      {kPlan + "--micro-batch 3 --global-batch 8", "--global-batch"},
      {kFixed + "--margin 0.6", "--margin"},  // a stated plan is held to it too
      {kFixed + "--precision auto", "--precision auto"},
      {kPlan + "--json --emit hf", "--emit"},
      {kPlan + "--global-batch 8 --grad-accum 3", "--grad-accum"},
      {kFixed + "--lora-alpha 16", "--lora-alpha"},
      {kFixed + "--lora-dropout 0.1", "--lora-dropout"},
      {kFixed + "--base-dtype fp32", "--base-dtype"},
      {kFixed + "--cpu-bf16 native", "--cpu-bf16"},
      {kFixed + "--gpus 4", "--sharding"},
      {kFixed + "--gpus 16 --nodes 3 --sharding ddp", "--nodes"},
      {kFixed + "--gpus 2 --nodes 4 --sharding ddp", "--nodes"},
      {kFixed + "--ddp-bucket-view", "--ddp-bucket-view"},
      {kFixed + "--gpus 2 --sharding fsdp --ddp-bucket-view", "--ddp-bucket-view"},
      {kPlan + "--gpus auto --nodes 2", "--nodes"},
      {kFixed + "--gpus 0 --sharding ddp", "--gpus"},
      {kFixed + "--gpus 1.5 --sharding ddp", "--gpus"},
      {kFixed + "--gpus 65537 --sharding ddp", "--gpus"},
      {kFixed + "--gpus 2 --sharding zero3 --offload optimizer", "--offload"},
      {kFixed + "--gpus 2 --sharding ddp --offload optimizer", "--offload"},
      {kFixed + "--gpus 2 --sharding fsdp --offload optimizer", "--offload optimizer+params"},
      {kFixed + "--gpus 2 --sharding zero2 --offload disk", "--offload"},
      {kFixed + "--gpus 2 --sharding zero2 --rank 2", "--rank"},
      {kFixed + "--gpus 2 --sharding zero2 --ds-reduce-bucket-size 0", "--ds-reduce-bucket-size"},
      {kFixed + "--gpus 2 --sharding zero2 --ds-overlap-comm maybe", "--ds-overlap-comm"},
      {kFixed + "--qlora --precision bf16 --gpus 2 --sharding zero3", "QLoRA"},
      {"plan --model tiny-llama --micro-batch 1 --gpu a100-80gb --gpu-mem 24GiB", "--gpu-mem"},
      {"plan --model tiny-llama --micro-batch 1 --gpu a100-80gb --device cpu", "--device"},
      {"plan --model tiny-llama --micro-batch 1 --device tpu", "--device"},
      {kFixed + "--qlora --precision fp32", "--qlora"},
      {kFixed + "--lora-rank 8 --lora-targets q,w", "'w'"},
      // Names outside their tables.
      {kFixed + "--precision fp8", "--precision"},
      {kFixed + "--optimizer lion", "--optimizer"},
      {kFixed + "--stack jax", "--stack"},
      {kFixed + "--optimizer-impl turbo", "--optimizer-impl"},
      {kFixed + "--attention flash3", "--attention"},
      {kFixed + "--emit tensorflow", "--emit"},
      {kFixed + "--lora-rank 8 --base-dtype int8", "--base-dtype"},
      {kFixed + "--cpu-bf16 maybe", "--cpu-bf16"},
      {"plan --model tiny-llama --micro-batch 1 --gpu a100", "a100"},
      {"plan --model llama-2-7 --micro-batch 1 --gpu a100-80gb", "llama-2-7"},
      // Not a Hugging Face Hub id (exactly one '/', the Hub's characters, no file ending):
      // a missing file, never a download.
      {"plan --model a/b/c --micro-batch 1 --gpu a100-80gb", "model file 'a/b/c' does not exist"},
      {"plan --model org/name.json --micro-batch 1 --gpu a100-80gb", "'org/name.json' does not"},
      {"plan --model .org/name --micro-batch 1 --gpu a100-80gb", "'.org/name' does not exist"},
      {"plan --model org/na..me --micro-batch 1 --gpu a100-80gb", "'org/na..me' does not exist"},
      {"plan --model org/na--me --micro-batch 1 --gpu a100-80gb", "'org/na--me' does not exist"},
      {"plan --model org/%2e%2e --micro-batch 1 --gpu a100-80gb", "'org/%2e%2e' does not exist"},
      {"plan --model 'org\\name/x' --micro-batch 1 --gpu a100-80gb",
       "'org\\name/x' does not exist"},
      {kFixed + "--frobnicate", "--frobnicate"},
      {"plan --gpu a100-80gb", "--model"},
      {"plan --model", "--model"},
      {"plan --model tiny-llama --micro-batch 1", "--gpu"},
      // Checkpoint policies: bounded, and naming real blocks.
      {kFixed + "--checkpoint layers:0-2147483647", "--checkpoint"},
      {kFixed + "--checkpoint layers:0-9999999999", "--checkpoint"},
      {kFixed + "--checkpoint layers:4096", "--checkpoint"},
      {kFixed + "--checkpoint layers:40", "--checkpoint"},
      {kFixed + "--checkpoint layers:", "--checkpoint"},
      {kFixed + "--checkpoint layers:5-2", "--checkpoint"},
      {kFixed + "--checkpoint layers:a", "--checkpoint"},
      {kFixed + "--checkpoint layers:-1", "--checkpoint"},
      {kFixed + "--checkpoint every:0", "--checkpoint"},
      {kFixed + "--checkpoint every:-1", "--checkpoint"},
      {kFixed + "--checkpoint every:99999999999", "--checkpoint"},
      {kFixed + "--checkpoint sometimes", "--checkpoint"},
      // Model specs with sizes past their bounds, or too large as a whole.
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/vocab-2-62.yaml",
       "vocab_size"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/hidden-2-40.yaml",
       "hidden_size"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/layers-1e9.yaml",
       "num_layers"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/layers-1e6.yaml",
       "num_layers"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/layers-negative.yaml",
       "num_layers"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/heads-2-20.yaml",
       "num_heads"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/mlp-2-62.yaml",
       "intermediate_size"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/positions-2-62.yaml",
       "max_positions"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/vocab-2-64.yaml",
       "{d}/vocab-2-64.yaml"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/eps-nan.yaml", "norm_eps"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/eps-inf.yaml", "norm_eps"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/dropout-nan.yaml",
       "attention_dropout"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/dropout-1.5.yaml",
       "attention_dropout"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/theta-inf.yaml", "rope"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/kv-heads-negative.yaml",
       "num_kv_heads"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/head-dim-2-40.yaml",
       "head_dim"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/unknown-field.yaml",
       "sparkle"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/unknown-family.yaml",
       "{d}/unknown-family.yaml"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/params-2-64.yaml",
       "too large to plan"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/every-dim-huge.yaml",
       "{d}/every-dim-huge.yaml"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/map-key.yaml",
       "{d}/map-key.yaml"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/a-list.yaml",
       "{d}/a-list.yaml"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/empty.yaml",
       "{d}/empty.yaml"},
      // A step too large for 64 bits, from sizes each within bounds: never FITS.
      {"plan --model {d}/long-context.yaml --gpu a100-80gb --micro-batch 1048576 --seq-len "
       "16777216",
       "too large to plan"},
      {"plan --model {d}/long-context.yaml --gpu a100-80gb --micro-batch 1048576 --seq-len "
       "16777216 --grad-accum 1048576",
       "too large to plan"},
      {"plan --model llama-3-8b --gpu-mem 8EiB --micro-batch 1 --seq-len 8192", "--gpu-mem"},
      // HF config.json imports.
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/n-embd-2-62.json",
       "hidden_size"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/1e400.json",
       "{d}/1e400.json"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/vocab-u64.json",
       "vocab_size"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/vocab-2-62.json",
       "vocab_size"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/layers-1e6.json",
       "num_layers"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/model-type.json", "mamba"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/string-size.json", "n_embd"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/missing-field.json",
       "n_head"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/n-inner-negative.json",
       "intermediate_size"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/truncated.json",
       "{d}/truncated.json"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/a-list.json",
       "{d}/a-list.json"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/rope.json",
       "original_max_position_embeddings"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/qwen3-window.json",
       "use_sliding_window"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/qwen3-head-dim.json",
       "head_dim"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/qwen3-bias.json",
       "attention_bias"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/phi3-window.json",
       "sliding_window"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/phi3-rotary.json",
       "partial_rotary_factor"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/phi3-longrope.json",
       "longrope"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/qwen3-moe-sparse-step.json",
       "decoder_sparse_step"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/qwen3-moe-dense-layers.json",
       "mlp_only_layers"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model "
       "{d}/qwen3-moe-router-logits.json",
       "output_router_logits"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/qwen3-moe-top-k.json",
       "num_experts_per_tok"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/mixtral-jitter.json",
       "router_jitter_noise"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/mixtral-router-logits.json",
       "output_router_logits"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/moe-top-k.yaml",
       "num_experts_per_tok"},
      {"plan --gpu a100-80gb --micro-batch 1 --seq-len 64 --model {d}/llama-experts.yaml",
       "num_experts_per_tok"},
      // Files that are not regular files, or too large: an error, not a hang.
      {"plan --gpu a100-80gb --micro-batch 1 --model /dev/zero", "/dev/zero"},
      {"plan --gpu a100-80gb --micro-batch 1 --model /dev/null", "/dev/null"},
      {"plan --gpu a100-80gb --micro-batch 1 --model {d}/fifo.yaml", "{d}/fifo.yaml"},
      {"plan --gpu a100-80gb --micro-batch 1 --model {d}/fifo.json", "{d}/fifo.json"},
      {"plan --gpu a100-80gb --micro-batch 1 --model {d}/dir-config", "{d}/dir-config/config.json"},
      {"plan --gpu a100-80gb --micro-batch 1 --model {d}/a-directory",
       "{d}/a-directory/config.json"},
      {"plan --gpu a100-80gb --micro-batch 1 --model {d}/missing.yaml", "{d}/missing.yaml"},
      {"plan --gpu a100-80gb --micro-batch 1 --model {d}/big.yaml", "{d}/big.yaml"},
      // Outputs that cannot be written: refused before any work. A device or a FIFO is
      // written directly (tests/output_paths_test.sh), so /dev/full fails at the write.
      {kFixed + "-o /dev/full", "/dev/full", 1},
      {kFixed + "-o {d}/a-directory", "{d}/a-directory"},
      {kFixed + "-o {d}/no/such/dir/plan.yaml", "{d}/no/such/dir/plan.yaml"},
      {"simulate --model tiny-llama --device cpu --seq-len 32 --micro-batch 1 --csv /dev/full",
       "/dev/full", 1},
      {"simulate --model tiny-llama --device cpu --seq-len 32 --micro-batch 1 --svg "
       "{d}/a-directory",
       "--svg"},
      {"simulate --model tiny-llama --device cpu --seq-len 32 --micro-batch 1 --csv "
       "{d}/no/such/t.csv",
       "{d}/no/such/t.csv"},
      {"simulate --model tiny-llama --device cpu --seq-len 32 --micro-batch 0", "--micro-batch"},
      {"plon --model tiny-llama", "plon"},
  };
}

#if HEADROOM_WITH_TORCH
const std::string kTrain = "train --model tiny-gpt2 --device cpu --seq-len 32 --precision fp32 ";

std::vector<BadInput> TrainCases() {
  return {
      // A plan file states the whole request.
      {"train --plan {d}/p.yaml --micro-batch 4", "--micro-batch"},
      {"train --plan {d}/p.yaml --model gpt2", "--model"},
      {"train --plan {d}/p.yaml --seq-len 64", "--seq-len"},
      {"train --plan {d}/p.yaml --precision bf16", "--precision"},
      {"train --plan {d}/p.yaml --lora-rank 8", "--lora-rank"},
      {"train --plan {d}/p.yaml --checkpoint all", "--checkpoint"},
      // Solver flags need train --auto; output flags belong to `plan`.
      {"train --plan {d}/p.yaml --auto", "--auto"},
      {kTrain + "--plan-out {d}/x.yaml", "--plan-out"},
      {kTrain + "--global-batch 8", "--global-batch"},
      {kTrain + "--margin 0.1", "--margin"},
      {kTrain + "--auto --memory-limit lots", "--memory-limit"},
      {kTrain + "--json", "--json"},
      {kTrain + "-o {d}/x.yaml", "-o"},
      {kTrain + "--emit hf", "--emit"},
      {kTrain + "--gpus auto", "--gpus auto"},
      {kTrain + "--gpus 2", "--gpus 2"},
      {kTrain + "--gpus 2 --sharding fsdp", "--emit"},
      {"train --model tiny-gpt2 --device cpu --precision auto", "--precision auto"},
      {kTrain + "--stack pytorch", "--stack"},
      {kTrain + "--optimizer adafactor", "adafactor"},
      {kTrain + "--qlora", "QLoRA"},
      // Numbers.
      {kTrain + "--steps 18446744073709551616", "--steps"},
      {kTrain + "--steps 0", "--steps"},
      {kTrain + "--steps -1", "--steps"},
      {kTrain + "--steps 1000000001", "--steps"},
      {kTrain + "--lr nan", "--lr"},
      {kTrain + "--lr inf", "--lr"},
      {kTrain + "--lr 0", "--lr"},
      {kTrain + "--lr -1e-3", "--lr"},
      {kTrain + "--seed -1", "--seed"},
      {kTrain + "--seed 99999999999999999999", "--seed"},
      {kTrain + "--save-every -1", "--save-every"},
      {kTrain + "--save-every 0", "--save-every"},
      {kTrain + "--steps 10 --save-every 20", "--save-every"},
      {kTrain + "--state {d}/s.state", "--state"},
      {kTrain + "--data-format u16", "--data-format"},
      {kTrain + "--data {d}/odd.bin --data-format u64", "--data-format"},
      {kTrain + "--memory-limit 0.4B", "--memory-limit"},
      {kTrain + "--memory-limit nan", "--memory-limit"},
      {kTrain + "--memory-limit 0", "--memory-limit"},
      {kTrain + "--memory-limit 18446744073709551616", "--memory-limit"},
      // Files: named in the error, never a hang or a trace.
      {"train --plan {d}/fifo-plan.yaml", "{d}/fifo-plan.yaml"},
      {"train --plan /dev/zero", "/dev/zero"},
      {"train --plan {d}/a-directory", "{d}/a-directory"},
      {"train --plan {d}/missing-plan.yaml", "{d}/missing-plan.yaml"},
      {"train --plan {d}/garbage.yaml", "{d}/garbage.yaml"},
      {"train --plan {d}/huge-plan.yaml", "{d}/huge-plan.yaml"},
      {"train --plan {d}/nan-plan.yaml", "{d}/nan-plan.yaml"},
      {kTrain + "--steps 1 --weights {d}/fifo.safetensors", "{d}/fifo.safetensors"},
      {kTrain + "--steps 1 --weights /dev/zero", "/dev/zero"},
      {kTrain + "--steps 1 --weights {d}/garbage.bin", "{d}/garbage.bin"},
      {kTrain + "--steps 1 --weights {d}/zero-header.safetensors", "--weights"},
      {kTrain + "--steps 1 --weights {d}/missing.safetensors", "{d}/missing.safetensors"},
      {kTrain + "--steps 1 --data {d}/fifo.bin", "{d}/fifo.bin"},
      {kTrain + "--steps 1 --data /dev/zero", "/dev/zero"},
      {kTrain + "--steps 1 --data {d}/missing.bin", "{d}/missing.bin"},
      {kTrain + "--steps 1 --data {d}/odd.bin", "{d}/odd.bin"},
      {kTrain + "--steps 1 --resume {d}/garbage.bin", "{d}/garbage.bin"},
      {kTrain + "--steps 1 --resume {d}/fifo.state", "{d}/fifo.state"},
      {kTrain + "--steps 1 --resume {d}/missing.state", "{d}/missing.state"},
      {kTrain + "--steps 1 --resume {d}/zero-header.safetensors", "--resume"},
      {kTrain + "--steps 1 --report {d}/no/such/dir/r.json", "{d}/no/such/dir/r.json"},
      {kTrain + "--steps 1 --save-every 1 --state {d}/no/such/dir/s.state", "--state"},
      {kTrain + "--steps 1 --report /dev/full", "/dev/full", 1},
  };
}
#endif

std::vector<BadInput> AllCases() {
  std::vector<BadInput> cases = PlanCases();
#if HEADROOM_WITH_TORCH
  for (BadInput& c : TrainCases()) cases.push_back(std::move(c));
#endif
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, CliBadInputTable, testing::ValuesIn(AllCases()),
                         [](const testing::TestParamInfo<BadInput>& p) {
                           return "case" + std::to_string(p.index);
                         });

// The table is the acceptance: at least 150 bad inputs in a full build.
TEST(CliBadInputTable, CoversAtLeast150Inputs) {
  EXPECT_GE(PlanCases().size(), 140u);
#if HEADROOM_WITH_TORCH
  EXPECT_GE(AllCases().size(), 150u);
#endif
}

}  // namespace
}  // namespace headroom
