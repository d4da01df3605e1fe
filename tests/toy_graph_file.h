// A toy graph file (docs/graph-file.md) and its helpers, shared by the tests that read
// and expand graph files (graph_file_test.cc, rolled_loop_test.cc): an embedding, two
// layers of one template and a loss, planned in fp32 on the CPU.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "models/build_graph.h"
#include "models/graph_file.h"

namespace headroom::toy_graph {

using nlohmann::json;

inline constexpr int64_t kVocab = 16, kHidden = 8;

inline json Op(const std::string& name, const std::string& aten, json inputs, json outputs,
               json saves, json grads, const std::string& op_class = "elementwise") {
  return {{"name", name},
          {"aten", aten},
          {"class", op_class},
          {"inputs", inputs},
          {"outputs", outputs},
          {"aliases_input", false},
          {"saves_inputs", saves},
          {"saved_outputs", json::array({false})},
          {"saved_extra", json::array()},
          {"grads", grads},
          {"backward_workspace", json::array()},
          {"flops", {{"forward", json::array()}, {"backward", json::array()}}}};
}

inline json Activation(const std::string& name, json shape) {
  return {{"name", name}, {"role", "activation"}, {"shape", shape}, {"dtype", "f32"}};
}

// Embedding, two layers of one template (x @ w then x + that), a loss over labels of s + 1.
inline json TinyGraphFile() {
  const json local0 = json::array({"local", 0}), local1 = json::array({"local", 1});
  const json prologue = {
      {"tensors",
       {{{"name", "input_ids"}, {"role", "input"}, {"shape", {"b", "s"}}, {"dtype", "i64"}},
        {{"name", "model.embed.weight"},
         {"role", "parameter"},
         {"shape", {kVocab, kHidden}},
         {"dtype", "f32"},
         {"trainable", true},
         {"lora", false}},
        {{"name", "embed"},
         {"role", "activation"},
         {"shape", {"b", "s", kHidden}},
         {"dtype", "f32"}}}},
      {"ops",
       {Op("model.embed/embedding", "embedding", json::array({local1, local0}), {2}, {false, true},
           {"new", "none"})}},
      {"output", 2},
      {"input_embeddings", 2}};
  const json layer = {{"tensors",
                       {{{"name", "w"},
                         {"role", "parameter"},
                         {"shape", {kHidden, kHidden}},
                         {"dtype", "f32"},
                         {"trainable", true},
                         {"lora", false}},
                        {{"name", "proj"},
                         {"role", "activation"},
                         {"shape", {"b", "s", kHidden}},
                         {"dtype", "f32"}},
                        {{"name", "out"},
                         {"role", "activation"},
                         {"shape", {"b", "s", kHidden}},
                         {"dtype", "f32"}}}},
                      {"ops",
                       {Op("proj/mm", "mm", json::array({json::array({"input"}), local0}), {1},
                           {true, true}, {"new", "new"}, "matmul"),
                        Op("/add", "add", json::array({json::array({"input"}), local1}), {2},
                           {false, false}, {"pass", "pass"})}},
                      {"output", 2}};
  const json epilogue = {
      {"tensors",
       {{{"name", "labels"}, {"role", "input"}, {"shape", {"b", "s+1"}}, {"dtype", "i64"}},
        {{"name", "loss"}, {"role", "activation"}, {"shape", json::array()}, {"dtype", "f32"}}}},
      {"ops",
       {Op("/loss", "nll_loss", json::array({json::array({"input"}), local0}), {1}, {true, false},
           {"new", "none"})}},
      {"loss", 1}};
  return {{"format", "headroom-graph"},
          {"version", 2},
          {"model_type", "toy"},
          {"name", "toy-2l"},
          {"source", {{"transformers", "5.24.0"}}},
          {"regime",
           {{"device", "cpu"},
            {"precision", "fp32"},
            {"mode", "full"},
            {"attention", "sdpa"},
            {"stack", "pytorch"},
            {"kv_cache", true},
            {"min_seq_len", 0}}},
          {"config",
           {{"vocab_size", kVocab},
            {"hidden_size", kHidden},
            {"num_layers", 2},
            {"num_heads", 2},
            {"max_positions", 128}}},
          {"valid_seq_len", {0, 64}},
          {"layer_prefix", "model.layers."},
          {"layer_types", {"decoder", "decoder"}},
          {"prologue", prologue},
          {"templates", {{"decoder", layer}}},
          {"epilogue", epilogue}};
}

// The parse error of `file`, or "parsed".
inline std::string ParseErrorOf(const json& file) {
  Result<ImportedGraph> parsed = ParseImportedGraph(file.dump(), "toy.json");
  return parsed ? std::string("parsed") : parsed.error().message;
}

inline GraphOptions Fp32Options(int64_t seq_len) {
  GraphOptions options;
  options.attention_call.device.cuda = false;
  options.precision = Precision::kFp32;
  options.kv_cache = true;
  options.seq_len = seq_len;
  return options;
}

}  // namespace headroom::toy_graph
