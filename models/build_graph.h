// Turns a ModelSpec and the fine-tuning/attention options into the OpGraph of one
// training micro-batch (forward + loss), dispatching to the family's builder.
#pragma once

#include "models/layer.h"

#include <string>

#include "models/layer_builder.h"
#include "models/model_spec.h"
#include "planner/core/result.h"
#include "planner/graph/op_graph.h"

namespace headroom {

Result<OpGraph> BuildGraph(const ModelSpec& spec, const GraphOptions& options);

// Per-family builders; BuildGraph validates options first.
void BuildGpt2Graph(const ModelSpec& spec, LayerBuilder& layers);
void BuildLlamaGraph(const ModelSpec& spec, LayerBuilder& layers);
void BuildBertGraph(const ModelSpec& spec, LayerBuilder& layers);
void BuildPhi3Graph(const ModelSpec& spec, LayerBuilder& layers);
void BuildGemmaGraph(const ModelSpec& spec, LayerBuilder& layers);
// A decoder layer's sparse mixture-of-experts MLP over the normalized hidden states x
// [b, s, h] (Qwen3-MoE, Mixtral); returns its output [b, s, h].
TensorId SparseMoeBlock(LayerBuilder& layers, const std::string& prefix, TensorId x);

}  // namespace headroom
