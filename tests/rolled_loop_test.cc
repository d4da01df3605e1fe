// A graph file's rolled loops (docs/graph-file.md, `loops`): the middle iteration
// repeated once per chunk of the sequence, or twice with the first standing for the rest
// (RepeatedOps); loops refused when their iterations differ; and the regimes on each side
// of a sequence chunk, which the first import learns.
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/graph_file.h"
#include "models/model_import.h"
#include "tests/toy_graph_file.h"

// In the toy's namespace: its helpers by their short names (graph_file_test.cc).
namespace headroom::toy_graph {
namespace {

// A layer whose scan runs one op per 16-token chunk, rolled by the import: the first
// iteration, one middle iteration and the last, then the layer's output. The first
// iteration's state is held by Python until the middle iteration's op has run.
json ScanLayer() {
  const json input = json::array({"input"});
  const auto local = [](int k) { return json::array({"local", k}); };
  return {{"tensors",
           {Activation("zero", {"b", kHidden}), Activation("first", {"b", kHidden}),
            Activation("middle", {"b", kHidden}), Activation("last", {"b", kHidden}),
            Activation("out", {"b", "s", kHidden})}},
          {"ops",
           {Op("/zeros", "zeros", json::array(), {0}, json::array(), json::array()),
            Op("scan/add", "add", {local(0), input}, {1}, {false, false}, {"pass", "none"}),
            Op("scan/add", "add", {local(1), input}, {2}, {false, false}, {"pass", "none"}),
            Op("scan/add", "add", {local(2), input}, {3}, {false, false}, {"pass", "none"}),
            Op("/mul", "mul", {input, local(3)}, {4}, {true, true}, {"new", "new"})}},
          {"loops", {{{"first_op", 2}, {"ops", 1}, {"iterations", "chunks(s,16)"}}}},
          {"holds", {{{"tensor", local(1)}, {"until_op", 2}}}},
          {"output", 4}};
}

// The scan's ops in the second layer, in order.
std::vector<OpId> ScanOps(const OpGraph& graph) {
  std::vector<OpId> scan;
  for (int i = 0; i < graph.num_ops(); ++i) {
    if (graph.op(OpId{i}).name == "model.layers.1.scan/add") scan.push_back(OpId{i});
  }
  return scan;
}

TEST(GraphFile, UnrollsARolledLoopOnceForEachChunk) {
  json file = TinyGraphFile();
  file["templates"]["decoder"] = ScanLayer();
  Result<ImportedGraph> parsed = ParseImportedGraph(file.dump(), "toy.json");
  ASSERT_TRUE(parsed) << parsed.error().message;
  for (const auto& [seq_len, chunks] : {std::pair{48, 3}, std::pair{64, 4}, std::pair{63, 4}}) {
    Result<OpGraph> graph = ExpandImportedGraph(*parsed, Fp32Options(seq_len));
    ASSERT_TRUE(graph) << graph.error().message;
    // Prologue and loss, and per layer: zeros, one add per chunk, mul.
    EXPECT_EQ(graph->num_ops(), 2 + 2 * (chunks + 2)) << seq_len;
    const std::vector<OpId> scan = ScanOps(*graph);
    ASSERT_EQ(scan.size(), size_t(chunks));
    // The plan names the reference code it assumes, once for the module.
    ASSERT_EQ(graph->assumptions().size(), 1u);
    EXPECT_NE(graph->assumptions()[0].find(
                  fmt::format("scan: the model's reference code, a Python loop over 16-token "
                              "chunks ({} at this sequence)",
                              chunks)),
              std::string::npos)
        << graph->assumptions()[0];
    // Each chunk reads the state the one before it made; the layer's output, the last.
    for (size_t c = 1; c < scan.size(); ++c)
      EXPECT_EQ(graph->op(scan[c]).inputs[0], graph->op(scan[c - 1]).outputs[0]);
    EXPECT_EQ(graph->op(OpId{graph->num_ops() - 2}).inputs[1], graph->op(scan.back()).outputs[0]);
    // The hold repeats with the middle iteration: each state until the next chunk's op.
    std::vector<std::pair<TensorId, OpId>> holds;
    for (const auto& hold : graph->held_until_op()) {
      if (graph->op(hold.second).name == "model.layers.1.scan/add") holds.push_back(hold);
    }
    ASSERT_EQ(holds.size(), size_t(chunks - 2));
    for (size_t r = 0; r < holds.size(); ++r) {
      EXPECT_EQ(holds[r].first, graph->op(scan[r]).outputs[0]);
      EXPECT_EQ(holds[r].second, scan[r + 1]);
    }
  }
  Result<OpGraph> short_scan = ExpandImportedGraph(*parsed, Fp32Options(32));
  ASSERT_FALSE(short_scan);
  EXPECT_NE(short_scan.error().message.find("at least 3"), std::string::npos)
      << short_scan.error().message;
}

// Past two middle repetitions, the first stands for all but the last (RepeatedOps): 8
// chunks run the first iteration, two middle ones (the first marked for 5) and the last.
TEST(GraphFile, HoldsALongLoopsRepetitionsOnce) {
  json file = TinyGraphFile();
  file["templates"]["decoder"] = ScanLayer();
  file["valid_seq_len"] = {0, 128};
  Result<ImportedGraph> parsed = ParseImportedGraph(file.dump(), "toy.json");
  ASSERT_TRUE(parsed) << parsed.error().message;
  Result<OpGraph> graph = ExpandImportedGraph(*parsed, Fp32Options(128));
  ASSERT_TRUE(graph) << graph.error().message;
  EXPECT_EQ(graph->num_ops(), 2 + 2 * (4 + 2));
  ASSERT_EQ(graph->repeated().size(), 2u);
  const std::vector<OpId> scan = ScanOps(*graph);
  ASSERT_EQ(scan.size(), 4u);
  const RepeatedOps& held = graph->repeated()[1];
  EXPECT_EQ(held.first_op, scan[1]);
  EXPECT_EQ(held.ops, 1);
  EXPECT_EQ(held.times, 5);
  for (size_t c = 1; c < scan.size(); ++c)
    EXPECT_EQ(graph->op(scan[c]).inputs[0], graph->op(scan[c - 1]).outputs[0]);
  const std::vector<int64_t> executions = graph->ExecutionsPerOp();
  EXPECT_EQ(executions[scan[1].value], 5);
  EXPECT_EQ(executions[scan[2].value], 1);
  // Every repetition expanded: 6 middle ones, none held.
  Result<OpGraph> every =
      ExpandImportedGraph(*parsed, Fp32Options(128), {.hold_repetitions_once = false});
  ASSERT_TRUE(every) << every.error().message;
  EXPECT_EQ(every->num_ops(), 2 + 2 * (8 + 2));
  EXPECT_TRUE(every->repeated().empty());
}

TEST(GraphFile, RefusesLoopsWhoseIterationsDiffer) {
  const auto error_of = [](const json& layer) {
    json file = TinyGraphFile();
    file["templates"]["decoder"] = layer;
    return ParseErrorOf(file);
  };
  json other = ScanLayer();
  other["ops"][3]["aten"] = "sub";
  EXPECT_NE(error_of(other).find("differs between its iterations"), std::string::npos)
      << error_of(other);
  json outside = ScanLayer();
  outside["loops"][0]["first_op"] = 4;
  EXPECT_NE(error_of(outside).find("a loop outside"), std::string::npos) << error_of(outside);
  json output = ScanLayer();
  output["output"] = 2;
  EXPECT_NE(error_of(output).find("made inside a loop"), std::string::npos) << error_of(output);
  json spanning = ScanLayer();
  spanning["holds"][0]["until_op"] = 3;
  EXPECT_NE(error_of(spanning).find("more than one iteration"), std::string::npos)
      << error_of(spanning);
}

// No config field names the chunks of a loop in the model's code: the first import finds
// them, and a sequence of whole chunks is imported again as the program it is.
TEST(ImportedModel, LearnsALoopsChunkFromItsFirstImport) {
  std::vector<TraceRegime> asked;
  const ImportedModel model("qwen3_next",
                            [&](const TraceRegime& regime) -> Result<ImportedGraph> {
                              asked.push_back(regime);
                              ImportedGraph graph;
                              graph.model_type = "qwen3_next";
                              graph.regime = regime;
                              graph.sequence_chunk = 64;
                              return graph;
                            },
                            {});
  Result<std::shared_ptr<const ImportedGraph>> whole = model.GraphFor({}, 1024);
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ((*whole)->regime.seq_multiple, 64);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0].seq_multiple, 0);
  Result<std::shared_ptr<const ImportedGraph>> sliced = model.GraphFor({}, 1000);
  ASSERT_TRUE(sliced);
  EXPECT_EQ((*sliced)->regime.seq_multiple, 0);
  EXPECT_EQ(asked.size(), 2u);  // the first import's graph
  EXPECT_EQ(model.RegimeFor({}, 2048).seq_multiple, 64);
}

// Past one chunk the program changes (the reshapes into chunks copy), and again at whole
// multiples of it: the regime a plan asks the import for says which it runs.
TEST(ImportedModel, ARegimeOnEachSideOfTheSequenceChunk) {
  const ImportedModel model("nemotron_h", nullptr, {}, 128);
  const TraceRegime one_chunk = model.RegimeFor({}, 100);
  EXPECT_EQ(one_chunk.min_seq_len, 0);
  EXPECT_EQ(one_chunk.seq_multiple, 0);
  const TraceRegime sliced = model.RegimeFor({}, 1000);
  EXPECT_EQ(sliced.min_seq_len, 129);
  EXPECT_EQ(sliced.seq_multiple, 0);
  const TraceRegime whole = model.RegimeFor({}, 1024);
  EXPECT_EQ(whole.min_seq_len, 129);
  EXPECT_EQ(whole.seq_multiple, 128);
  EXPECT_NE(DescribeRegime(whole).find("multiples of 128 tokens"), std::string::npos);
}

}  // namespace
}  // namespace headroom::toy_graph
