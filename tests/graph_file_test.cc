// The imported graph file (docs/graph-file.md): read, checked, expanded to the model's
// depth, refused for another regime or another sequence band, and planned. Its rolled
// loops and sequence chunks: rolled_loop_test.cc.
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "models/build_graph.h"
#include "models/graph_file.h"
#include "models/model_import.h"
#include "planner/core/gpu_catalog.h"
#include "planner/plan/plan_request.h"
#include "tests/toy_graph_file.h"

// In the toy's namespace: its helpers by their short names, none leaking into another
// test's namespace in a unity build.
namespace headroom::toy_graph {
namespace {

TEST(GraphFile, ExpandsOneBlockPerLayerWithItsModulePath) {
  Result<ImportedGraph> file = ParseImportedGraph(TinyGraphFile().dump(), "toy.json");
  ASSERT_TRUE(file) << file.error().message;
  Result<OpGraph> graph = ExpandImportedGraph(*file, Fp32Options(32));
  ASSERT_TRUE(graph) << graph.error().message;
  EXPECT_EQ(graph->num_ops(), 1 + 2 * 2 + 1);
  ASSERT_EQ(graph->blocks().size(), 2u);
  EXPECT_EQ(graph->ParameterCount(), kVocab * kHidden + 2 * kHidden * kHidden);
  bool named = false;
  for (TensorId p : graph->Parameters()) named |= graph->tensor(p).name == "model.layers.1.w";
  EXPECT_TRUE(named);
  EXPECT_EQ(graph->op(OpId{3}).name, "model.layers.1.proj/mm");
  // Layer 1 reads layer 0's output; the loss reads layer 1's.
  EXPECT_EQ(graph->op(OpId{3}).inputs[0], graph->blocks()[0].output);
  EXPECT_EQ(graph->op(OpId{5}).inputs[0], graph->blocks()[1].output);
  EXPECT_EQ(
      graph->tensor(graph->op(OpId{5}).inputs[1]).shape.Numel({.micro_batch = 2, .seq_len = 4}),
      10);
  EXPECT_EQ(graph->input_embeddings(), graph->op(OpId{0}).outputs[0]);
  EXPECT_EQ(graph->InputEmbeddingTable(), graph->op(OpId{0}).inputs[0]);
}

TEST(GraphFile, RefusesAnotherRegimeNamingBoth) {
  Result<ImportedGraph> file = ParseImportedGraph(TinyGraphFile().dump(), "toy.json");
  ASSERT_TRUE(file);
  GraphOptions bf16 = Fp32Options(32);
  bf16.precision = Precision::kBf16;
  Result<OpGraph> graph = ExpandImportedGraph(*file, bf16);
  ASSERT_FALSE(graph);
  EXPECT_NE(graph.error().message.find("imported for fp32 on cpu"), std::string::npos)
      << graph.error().message;
  EXPECT_NE(graph.error().message.find("bf16 on cpu"), std::string::npos);
  GraphOptions checkpointed = Fp32Options(32);
  checkpointed.kv_cache = false;
  EXPECT_FALSE(ExpandImportedGraph(*file, checkpointed));
}

TEST(GraphFile, RefusesOneDnnKernelsNamingAtensGemm) {
  Result<ImportedGraph> file = ParseImportedGraph(TinyGraphFile().dump(), "toy.json");
  ASSERT_TRUE(file);
  GraphOptions amx = Fp32Options(32);
  amx.cpu_bf16_matmul = CpuBf16::kAmx;
  Result<OpGraph> graph = ExpandImportedGraph(*file, amx);
  ASSERT_FALSE(graph);
  EXPECT_NE(graph.error().message.find("oneDNN's amx kernel"), std::string::npos)
      << graph.error().message;
  EXPECT_NE(graph.error().message.find("--cpu-bf16 aten"), std::string::npos);
  GraphOptions aten = Fp32Options(32);
  aten.cpu_bf16_matmul = CpuBf16::kAtenGemm;
  EXPECT_TRUE(ExpandImportedGraph(*file, aten));
}

// A template's kept_by_arguments names tensors of each layer expanded from it; an index
// that is no activation the template makes is refused.
TEST(GraphFile, KeptByArgumentsMarksEachLayersTensor) {
  json text = TinyGraphFile();
  text["templates"]["decoder"]["kept_by_arguments"] = {1};
  Result<ImportedGraph> file = ParseImportedGraph(text.dump(), "toy.json");
  ASSERT_TRUE(file) << file.error().message;
  Result<OpGraph> graph = ExpandImportedGraph(*file, Fp32Options(32));
  ASSERT_TRUE(graph) << graph.error().message;
  ASSERT_EQ(graph->blocks().size(), 2u);
  for (const BlockSegment& block : graph->blocks()) {
    ASSERT_EQ(block.kept_by_arguments.size(), 1u);
    EXPECT_EQ(graph->tensor(block.kept_by_arguments[0]).producer, block.first_op);
  }
  for (const int bad : {0, 3}) {  // the weight; past the tensors
    text["templates"]["decoder"]["kept_by_arguments"] = {bad};
    Result<ImportedGraph> refused = ParseImportedGraph(text.dump(), "toy.json");
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("kept by the arguments"), std::string::npos)
        << refused.error().message;
  }
}

TEST(GraphFile, RefusesSequencesOutsideTheTracedBand) {
  Result<ImportedGraph> file = ParseImportedGraph(TinyGraphFile().dump(), "toy.json");
  ASSERT_TRUE(file);
  EXPECT_TRUE(ExpandImportedGraph(*file, Fp32Options(64)));
  Result<OpGraph> longer = ExpandImportedGraph(*file, Fp32Options(65));
  ASSERT_FALSE(longer);
  EXPECT_NE(longer.error().message.find("sequences of 0 to 64 tokens"), std::string::npos)
      << longer.error().message;
}

TEST(GraphFile, MalformedFilesAreErrorsNamingWhatIsWrong) {
  json v = TinyGraphFile();
  v["version"] = 3;
  EXPECT_NE(ParseErrorOf(v).find("version 3"), std::string::npos) << ParseErrorOf(v);
  json missing = TinyGraphFile();
  missing.erase("layer_types");
  EXPECT_NE(ParseErrorOf(missing).find("'layer_types'"), std::string::npos)
      << ParseErrorOf(missing);
  json unknown_template = TinyGraphFile();
  unknown_template["layer_types"][1] = "moe";
  EXPECT_NE(ParseErrorOf(unknown_template).find("layer type 'moe' has no template"),
            std::string::npos);
  json dangling = TinyGraphFile();
  dangling["templates"]["decoder"]["ops"][0]["inputs"][1] = json::array({"local", 7});
  EXPECT_NE(ParseErrorOf(dangling).find("does not exist"), std::string::npos)
      << ParseErrorOf(dangling);
  json shared = TinyGraphFile();
  shared["templates"]["decoder"]["ops"][0]["inputs"][1] = json::array({"shared", 3});
  EXPECT_NE(ParseErrorOf(shared).find("does not exist"), std::string::npos);
  json early = TinyGraphFile();  // reads the add's output before the add makes it
  early["templates"]["decoder"]["ops"][0]["inputs"][1] = json::array({"local", 2});
  EXPECT_NE(ParseErrorOf(early).find("before it is made"), std::string::npos)
      << ParseErrorOf(early);
  json dim = TinyGraphFile();
  dim["epilogue"]["tensors"][0]["shape"][1] = "s+x";
  EXPECT_NE(ParseErrorOf(dim).find("bad dimension"), std::string::npos) << ParseErrorOf(dim);
  json cubic = TinyGraphFile();
  cubic["templates"]["decoder"]["ops"][0]["backward_workspace"] = {{4, 1, 3}};
  EXPECT_NE(ParseErrorOf(cubic).find("outside"), std::string::npos) << ParseErrorOf(cubic);
  json grads = TinyGraphFile();
  grads["templates"]["decoder"]["ops"][1]["grads"] = {"pass"};
  EXPECT_NE(ParseErrorOf(grads).find("one flow per input"), std::string::npos);
  json weight_out = TinyGraphFile();  // the prologue hands on the embedding's weight
  weight_out["prologue"]["output"] = 1;
  EXPECT_NE(ParseErrorOf(weight_out).find("handed on but no op of the section makes it"),
            std::string::npos)
      << ParseErrorOf(weight_out);
  EXPECT_NE(ParseErrorOf(json::array()).find("not a headroom graph file"), std::string::npos)
      << ParseErrorOf(json::array());
}

TEST(GraphFile, PlansThroughTheModelSpec) {
  Result<ModelSpec> spec = LoadGraphFile(TinyGraphFile().dump(), "toy.json");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->family, ModelFamily::kImported);
  EXPECT_EQ(spec->model_type, "toy");
  EXPECT_EQ(spec->num_layers, 2);
  GraphOptions options = Fp32Options(16);
  Result<OpGraph> graph = BuildGraph(*spec, options);
  ASSERT_TRUE(graph) << graph.error().message;
  EXPECT_EQ(graph->blocks().size(), 2u);
}

// The toy's fp32 step on the CPU at s = 16.
Result<StepPrediction> PredictToyOnCpu(const json& file) {
  Result<ModelSpec> spec = LoadGraphFile(file.dump(), "toy.json");
  if (!spec) return spec.error();
  TrainingConfig config;
  config.precision = Precision::kFp32;
  config.seq_len = 16;
  config.kernels = {.cuda = false, .cpu_bf16 = CpuBf16::kAtenGemm, .cpu_threads = 1};
  return Predict({.model = *spec, .config = config, .device = CpuDevice(int64_t{1} << 40)});
}

TEST(GraphFile, AMatmulNoGradientReachesGivesItsWeightNone) {
  // The add reads the weight instead of the matmul's output, which no op reads: the
  // engine never runs the matmul's node, so the weight's one gradient is the add's.
  json dead = TinyGraphFile();
  dead["templates"]["decoder"]["ops"][1]["inputs"][1] = json::array({"local", 0});
  json no_weight_grad = dead;
  no_weight_grad["templates"]["decoder"]["ops"][0]["grads"] = {"new", "none"};
  Result<StepPrediction> a = PredictToyOnCpu(dead), b = PredictToyOnCpu(no_weight_grad);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(a->allocated_peak_bytes, b->allocated_peak_bytes);
  Result<StepPrediction> whole = PredictToyOnCpu(TinyGraphFile());
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_LT(a->allocated_peak_bytes, whole->allocated_peak_bytes);  // no [b, s, 8] product
}

TEST(GraphFile, ASpecWithoutItsGraphIsRefused) {
  // What a plan file or a YAML spec naming `family: imported` gives: sizes, no graph.
  ModelSpec spec;
  spec.name = "toy-2l";
  spec.family = ModelFamily::kImported;
  Result<OpGraph> graph = BuildGraph(spec, Fp32Options(16));
  ASSERT_FALSE(graph);
  EXPECT_NE(graph.error().message.find("plan files do not carry its graph"), std::string::npos);
}

TEST(SymShape, SequencePlusAConstant) {
  const SymShape labels{Dim::B(), Dim::SPlus(1)};
  EXPECT_EQ(labels.Numel({.micro_batch = 3, .seq_len = 7}), 24);
  EXPECT_EQ(labels.ToString(), "[b, s+1]");
  EXPECT_FALSE(labels.SameNumel(SymShape{Dim::B(), Dim::S()}));
  EXPECT_TRUE(labels.SameNumel(SymShape{Dim::SPlus(1), Dim::B()}));
  EXPECT_TRUE(labels.ScalesWithBatch());
}

TEST(SymShape, SequenceRoundedUpToAMultiple) {
  const SymShape lse{Dim::B(), Dim::C(2), Dim::SRoundUp(32)};
  EXPECT_EQ(lse.Numel({.micro_batch = 3, .seq_len = 33}), 3 * 2 * 64);
  EXPECT_EQ(lse.Numel({.micro_batch = 1, .seq_len = 32}), 2 * 32);
  EXPECT_EQ(lse.ToString(), "[b, 2, round_up(s,32)]");
  EXPECT_FALSE(lse.SameNumel(SymShape{Dim::B(), Dim::C(2), Dim::S()}));
}

// Mamba-2's reference code keeps a state per 128-token chunk plus the initial one, and its
// decay between chunks is [chunks + 1]^2.
TEST(SymShape, ChunksOfTheSequence) {
  const SymShape states{Dim::B(), Dim::SChunks(128, 1), Dim::C(4)};
  EXPECT_EQ(states.Numel({.micro_batch = 2, .seq_len = 1000}), 2 * 9 * 4);
  EXPECT_EQ(states.Numel({.micro_batch = 2, .seq_len = 1024}), 2 * 9 * 4);
  EXPECT_EQ(states.Numel({.micro_batch = 2, .seq_len = 1025}), 2 * 10 * 4);
  EXPECT_EQ(states.ToString(), "[b, chunks(s,128)+1, 4]");
  EXPECT_FALSE(states.SameNumel(SymShape{Dim::B(), Dim::SChunks(128), Dim::C(4)}));
  const SymShape padded{Dim::B(), Dim::SRoundUp(64, 64)};
  EXPECT_EQ(padded.Numel({.micro_batch = 1, .seq_len = 65}), 128 + 64);
  EXPECT_EQ(padded.ToString(), "[b, round_up(s,64)+64]");
}

TEST(GraphFile, ReadsChunkDimensionsAndPaddedMonomials) {
  const auto error_of = [](const json& file) {
    Result<ImportedGraph> parsed = ParseImportedGraph(file.dump(), "toy.json");
    return parsed ? std::string("parsed") : parsed.error().message;
  };
  json chunks = TinyGraphFile();
  chunks["epilogue"]["tensors"][0]["shape"] = {"b", "chunks(s,128)+1", "chunks(s,128)+1"};
  EXPECT_EQ(error_of(chunks), "parsed");
  for (const char* bad : {"chunks(s,128)+", "chunks(s,128)-1", "chunks(s,0)", "chunks(s,128"}) {
    chunks["epilogue"]["tensors"][0]["shape"] = {"b", bad};
    EXPECT_NE(error_of(chunks).find("bad dimension"), std::string::npos) << bad;
  }
  json workspace = TinyGraphFile();
  json& op = workspace["templates"]["decoder"]["ops"][0];
  op["backward_workspace"] = json::array({json::array({3, 1, 2, "chunks(s,128)"})});
  Result<ImportedGraph> parsed = ParseImportedGraph(workspace.dump(), "toy.json");
  ASSERT_TRUE(parsed) << parsed.error().message;
  const SymSize& size = parsed->program.templates.at("decoder").ops[0].traced->backward_workspace;
  EXPECT_EQ(size.Bytes({.micro_batch = 2, .seq_len = 1000}), 3 * 2 * 8 * 8);
  EXPECT_EQ(size.Bytes({.micro_batch = 2, .seq_len = 1025}), 3 * 2 * 9 * 9);
  op["backward_workspace"] = json::array({json::array({3, 1, 2, "s+1"})});
  EXPECT_NE(error_of(workspace).find("pads s to nothing"), std::string::npos)
      << error_of(workspace);
}

// A model whose sequence is split into chunks runs one program at whole multiples of the
// chunk and another otherwise: a graph of one is refused for the other.
TEST(GraphFile, RefusesTheOtherSideOfAChunkMultiple) {
  json file = TinyGraphFile();
  file["sequence_chunk"] = 16;
  Result<ImportedGraph> sliced = ParseImportedGraph(file.dump(), "toy.json");
  ASSERT_TRUE(sliced) << sliced.error().message;
  EXPECT_TRUE(ExpandImportedGraph(*sliced, Fp32Options(40)));
  Result<OpGraph> whole = ExpandImportedGraph(*sliced, Fp32Options(48));
  ASSERT_FALSE(whole);
  EXPECT_NE(whole.error().message.find("of no whole 16-token chunks"), std::string::npos)
      << whole.error().message;
  file["regime"]["seq_multiple"] = 16;
  Result<ImportedGraph> multiples = ParseImportedGraph(file.dump(), "toy.json");
  ASSERT_TRUE(multiples);
  EXPECT_TRUE(ExpandImportedGraph(*multiples, Fp32Options(48)));
  Result<OpGraph> between = ExpandImportedGraph(*multiples, Fp32Options(40));
  ASSERT_FALSE(between);
  EXPECT_NE(between.error().message.find("of whole 16-token chunks"), std::string::npos)
      << between.error().message;
}

// A graph imported with images (the multimodal Gemma 3): its regime names the count, a
// plan for another count or none is refused, and a sequence must hold text beside the
// images' tokens (valid_seq_len starts past them).
TEST(GraphFile, ImagesPerSampleAreTheGraphsRegime) {
  json file = TinyGraphFile();
  file["regime"]["images"] = 2;
  file["valid_seq_len"] = {41, 64};
  Result<ImportedGraph> imported = ParseImportedGraph(file.dump(), "toy.json");
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_EQ(imported->regime.images, 2);
  EXPECT_NE(DescribeRegime(imported->regime).find("2 images per sample"), std::string::npos);
  GraphOptions options = Fp32Options(48);
  Result<OpGraph> text_only = ExpandImportedGraph(*imported, options);
  ASSERT_FALSE(text_only);
  EXPECT_NE(text_only.error().message.find("2 images per sample"), std::string::npos)
      << text_only.error().message;
  options.images_per_sample = 2;
  EXPECT_TRUE(ExpandImportedGraph(*imported, options));
  options.seq_len = 40;
  Result<OpGraph> no_text = ExpandImportedGraph(*imported, options);
  ASSERT_FALSE(no_text);
  EXPECT_NE(no_text.error().message.find("take 40 tokens of the sequence; plan --seq-len of at "
                                         "least 41"),
            std::string::npos)
      << no_text.error().message;
}

// A graph recorded with a kernel package bound (--kernels fla) is planned only with it.
TEST(GraphFile, KernelPackagesAreTheGraphsRegime) {
  json file = TinyGraphFile();
  file["regime"]["kernels"] = {"fla"};
  Result<ImportedGraph> imported = ParseImportedGraph(file.dump(), "toy.json");
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_EQ(imported->regime.kernels, std::vector<std::string>{"fla"});
  EXPECT_NE(DescribeRegime(imported->regime).find(", fla kernels"), std::string::npos);
  GraphOptions options = Fp32Options(48);
  Result<OpGraph> reference = ExpandImportedGraph(*imported, options);
  ASSERT_FALSE(reference);
  EXPECT_NE(reference.error().message.find("fla kernels"), std::string::npos)
      << reference.error().message;
  options.kernel_packages = {"fla"};
  EXPECT_TRUE(ExpandImportedGraph(*imported, options));
  const auto error_of = [](const json& kernels) {
    json bad = TinyGraphFile();
    bad["regime"]["kernels"] = kernels;
    return ParseErrorOf(bad);
  };
  EXPECT_NE(error_of({"liger"}).find("--kernels liger: the kernel packages planned are fla"),
            std::string::npos)
      << error_of({"liger"});
  EXPECT_NE(error_of("fla").find("kernels must be a list"), std::string::npos) << error_of("fla");
  EXPECT_NE(error_of({1}).find("kernels holds a non-string"), std::string::npos) << error_of({1});
}

// The kernel paths the import assumed (kernel_paths.py) reach the plan's assumptions.
TEST(GraphFile, AssumedKernelPathsReachThePlan) {
  json file = TinyGraphFile();
  file["assumptions"] = {"Mixer: the reference code; mamba_ssm's kernel is not modelled"};
  Result<ImportedGraph> imported = ParseImportedGraph(file.dump(), "toy.json");
  ASSERT_TRUE(imported) << imported.error().message;
  Result<OpGraph> graph = ExpandImportedGraph(*imported, Fp32Options(48));
  ASSERT_TRUE(graph) << graph.error().message;
  EXPECT_EQ(
      graph->assumptions(),
      std::vector<std::string>{"Mixer: the reference code; mamba_ssm's kernel is not modelled"});
  file["assumptions"] = "one line";
  Result<ImportedGraph> bad = ParseImportedGraph(file.dump(), "toy.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'assumptions' must be a list of strings"), std::string::npos)
      << bad.error().message;
}

TEST(GraphFile, ReadsRoundedDimensionsAndAttentionHeads) {
  const auto error_of = [](const json& file) {
    Result<ImportedGraph> parsed = ParseImportedGraph(file.dump(), "toy.json");
    return parsed ? std::string("parsed") : parsed.error().message;
  };
  json rounded = TinyGraphFile();
  rounded["epilogue"]["tensors"][0]["shape"] = {"b", "round_up(s,32)"};
  EXPECT_EQ(error_of(rounded), "parsed");
  rounded["epilogue"]["tensors"][0]["shape"] = {"b", "round_up(s,0)"};
  EXPECT_NE(error_of(rounded).find("bad dimension"), std::string::npos) << error_of(rounded);
  json heads = TinyGraphFile();
  json& op = heads["templates"]["decoder"]["ops"][0];
  op["attention_heads"] = {2, 2, 4};
  EXPECT_EQ(error_of(heads), "parsed");
  op["attention_heads"] = {4, 3, 2};
  EXPECT_NE(error_of(heads).find("must divide"), std::string::npos) << error_of(heads);
  op["attention_heads"] = {4, 0, 2};
  EXPECT_NE(error_of(heads).find("three positive sizes"), std::string::npos) << error_of(heads);
}

// The toy layer's matmul recorded as PyTorch's flash attention on CUDA ([b, 2 heads, s,
// head size 4]: its input is [b, s, 8]), with a recorded backward workspace of 16 MiB
// that puts the step's peak at its backward either way.
int64_t PeakOfFlashToy(bool with_heads) {
  json file = TinyGraphFile();
  file["regime"]["device"] = "cuda";
  file["regime"]["sm"] = 90;
  json& op = file["templates"]["decoder"]["ops"][0];
  op["aten"] = "_scaled_dot_product_flash_attention";
  op["backward_workspace"] = json::array({json::array({1 << 24, 0, 0})});
  if (with_heads) op["attention_heads"] = {2, 2, 4};
  Result<ModelSpec> spec = LoadGraphFile(file.dump(), "toy.json");
  EXPECT_TRUE(spec) << spec.error().message;
  Result<DeviceSpec> gpu = FindGpu("h100-80gb");
  EXPECT_TRUE(gpu);
  TrainingConfig config;
  config.precision = Precision::kFp32;
  config.seq_len = 64;
  config.kernels = {.cuda = true, .compute_capability = 9.0};  // what the CLI sets for the GPU
  PlanRequest request{.model = *spec, .config = config, .device = *gpu};
  Result<StepPrediction> step = Predict(request);
  EXPECT_TRUE(step) << step.error().message;
  return step ? step->allocated_peak_bytes : 0;
}

TEST(TracedCostRule, FlashBackwardScratchThatFakeTensorsNeverSee) {
  // mha_bwd's dq_accum fp32 [b, round128(s), h, head size rounded to 32] and softmax_d
  // fp32 [b, h, round128(s)]: at b = 1, s = 64, 2 heads of 4.
  const int64_t scratch = 4 * 128 * 2 * 32 + 4 * 2 * 128;
  EXPECT_EQ(PeakOfFlashToy(true) - PeakOfFlashToy(false), scratch);
}

TEST(TraceRegime, GpusThatPickSdpaKernelsAlikeShareOneCapability) {
  EXPECT_EQ(SdpaCapabilityClass(10.0), 90);  // B200: cuDNN first, as sm90
  EXPECT_EQ(SdpaCapabilityClass(9.0), 90);
  EXPECT_EQ(SdpaCapabilityClass(8.0), 80);
  EXPECT_EQ(SdpaCapabilityClass(8.9), 86);  // flash's head-size limit in training
  EXPECT_EQ(SdpaCapabilityClass(8.6), 86);
  EXPECT_EQ(SdpaCapabilityClass(12.0), 86);
  EXPECT_EQ(SdpaCapabilityClass(7.5), 70);  // no flash, no bf16
  EXPECT_EQ(SdpaCapabilityClass(7.0), 70);
  EXPECT_EQ(SdpaCapabilityClass(0), 80);  // unknown: a current data-centre GPU
}

// Three layers: "store" (the tiny decoder), then two "reuse" layers adding the store
// layer's projection (its tensor 1) to their input, as Gemma 4's KV-shared layers read the
// K/V the last layer of their type before them stored.
json SharedTensorGraphFile() {
  json file = TinyGraphFile();
  json reuse = {{"tensors", {Activation("out", {"b", "s", kHidden})}},
                {"ops",
                 {Op("/add", "add", {json::array({"input"}), json::array({"layer", "store", 1})},
                     {0}, {false, false}, {"pass", "pass"})}},
                {"output", 0}};
  file["templates"] = {{"store", file["templates"]["decoder"]}, {"reuse", reuse}};
  file["layer_types"] = {"store", "reuse", "reuse"};
  file["config"]["num_layers"] = 3;
  return file;
}

TEST(GraphFile, ALayerReadsTheLatestLayerOfTheKindItNames) {
  Result<ImportedGraph> parsed = ParseImportedGraph(SharedTensorGraphFile().dump(), "toy.json");
  ASSERT_TRUE(parsed) << parsed.error().message;
  Result<OpGraph> graph = ExpandImportedGraph(*parsed, Fp32Options(32));
  ASSERT_TRUE(graph) << graph.error().message;
  // embed, store's mm and add, one add per reuse layer, the loss.
  ASSERT_EQ(graph->num_ops(), 1 + 2 + 2 + 1);
  const TensorId stored = graph->op(OpId{1}).outputs[0];
  EXPECT_EQ(graph->op(OpId{3}).inputs[1], stored);
  EXPECT_EQ(graph->op(OpId{4}).inputs[1], stored);
  EXPECT_EQ(graph->op(OpId{4}).inputs[0], graph->op(OpId{3}).outputs[0]);
  EXPECT_NO_THROW(graph->CheckWellFormed());
}

TEST(GraphFile, RefusesALayerReadingAKindThatHasNotRun) {
  json unknown = SharedTensorGraphFile();
  unknown["templates"]["reuse"]["ops"][0]["inputs"][1] = {"layer", "nothing", 1};
  Result<ImportedGraph> parsed = ParseImportedGraph(unknown.dump(), "toy.json");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("refers to a tensor that does not exist"),
            std::string::npos)
      << parsed.error().message;
  json past = SharedTensorGraphFile();
  past["templates"]["reuse"]["ops"][0]["inputs"][1] = {"layer", "store", 3};
  EXPECT_FALSE(ParseImportedGraph(past.dump(), "toy.json"));
  json before = SharedTensorGraphFile();
  before["layer_types"] = {"reuse", "store", "reuse"};
  Result<ImportedGraph> reordered = ParseImportedGraph(before.dump(), "toy.json");
  ASSERT_TRUE(reordered) << reordered.error().message;
  Result<OpGraph> graph = ExpandImportedGraph(*reordered, Fp32Options(32));
  ASSERT_FALSE(graph);
  EXPECT_NE(graph.error().message.find(
                "decoder layer 0 reads a tensor of a layer of kind 'store', and no layer before "
                "it is of that kind"),
            std::string::npos)
      << graph.error().message;
}

}  // namespace
}  // namespace headroom::toy_graph
