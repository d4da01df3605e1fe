// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
// Models", eq. 1): a GPT layer in 16-bit with dropout and eager attention stores
// s*b*h*(34 + 5*a*s/h) bytes of activations for backward.
//
// Accounting, counted the same way as the paper: the bytes a layer keeps alive from
// its forward until its backward — everything saved for backward by the layer's ops
// (LayerNorm inputs, linear inputs, q/k/v, softmax output, dropout masks and outputs,
// GELU input). We measure it as the growth of live activation bytes at the start of
// backward when the model gains one layer, under mixed-fp16 (fp16 weights and
// activations, no autocast: the paper's Megatron setting). The paper leaves out
// LayerNorm's per-token fp32 mean and rstd (2 norms x 2 x 4 B x s*b = 16*s*b); we add
// them explicitly below.
#include <gtest/gtest.h>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/simulate/step_simulator.h"
#include "tests/timeline_probe.h"

namespace headroom {
namespace {

int64_t ActivationBytesAtBackwardStart(const ModelSpec& spec, const TrainingConfig& config) {
  const OpGraph graph = *BuildGraph(spec, {.attention_call = {.impl = AttentionImpl::kEager}});
  const Timeline t =
      SimulateSteps(graph, config, std::vector<bool>(graph.blocks().size(), false), {.steps = 1});
  return BreakdownAtBackwardStart(t)[static_cast<int>(Category::kActivations)];
}

TEST(Korthikanti, GptLayerSavedActivationsMatchEquationOne) {
  ModelSpec spec = *LoadCatalogModel("gpt2");  // hidden_dropout = attention_dropout = 0.1
  spec.activation = "gelu_pytorch_tanh";       // the paper's fused GELU (gelu_new saves 3 more)
  const int64_t h = spec.hidden_size, a = spec.num_heads;
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 128}, {2, 256}, {4, 64}}) {
    TrainingConfig config;
    config.precision = Precision::kMixedFp16;
    config.micro_batch = b;
    config.seq_len = s;
    ModelSpec one = spec, two = spec;
    one.num_layers = 1;
    two.num_layers = 2;
    const int64_t per_layer =
        ActivationBytesAtBackwardStart(two, config) - ActivationBytesAtBackwardStart(one, config);
    const int64_t paper = s * b * h * 34 + 5 * a * s * s * b;  // s*b*h*(34 + 5*a*s/h)
    const int64_t layer_norm_stats = 16 * s * b;
    EXPECT_EQ(per_layer, paper + layer_norm_stats) << "b=" << b << " s=" << s;
  }
}

}  // namespace
}  // namespace headroom
