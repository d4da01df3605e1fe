// Each op's cost rule against bytes computed by hand, at b = 2, s = 3.
#include <gtest/gtest.h>

#include "planner/simulate/op_cost.h"
#include "planner/simulate/optimizer_model.h"

namespace headroom {
namespace {

using Lifetime = InternalBuffer::Lifetime;
const ShapeEnv kEnv{.micro_batch = 2, .seq_len = 3};

SymShape Tokens(int64_t n) { return {Dim::B(), Dim::S(), Dim::C(n)}; }

// x: a [b, s, width] activation that requires grad, produced by an embedding.
TensorId TrainableActivation(OpGraph& g, int64_t width) {
  TensorId ids = g.AddInput("ids", {Dim::B(), Dim::S()}, DType::kI64);
  TensorId table = g.AddParameter("table", {Dim::C(16), Dim::C(width)}, {});
  return g.AddOp({.kind = OpKind::kEmbedding, .name = "embed", .inputs = {ids, table}},
                 {{.name = "x", .shape = Tokens(width)}})[0];
}

const OpNode& LastOp(const OpGraph& g) { return g.op(OpId{g.num_ops() - 1}); }

// One view op splitting x (a fused projection) into q [q_shape] and k, v [kv_shape].
std::vector<TensorId> SplitQkv(OpGraph& g, TensorId x, const SymShape& q_shape,
                               const SymShape& kv_shape) {
  return g.AddOp({.kind = OpKind::kView, .name = "split", .inputs = {x}},
                 {{.name = "q", .shape = q_shape, .alias_of = x},
                  {.name = "k", .shape = kv_shape, .alias_of = x},
                  {.name = "v", .shape = kv_shape, .alias_of = x}});
}

TEST(OpCost, LinearUnderAutocastSavesTheCastInput) {
  OpGraph g;
  TensorId x = g.AddInput("x", Tokens(4), DType::kF32);  // data: no grad
  TensorId w = g.AddParameter("w", {Dim::C(5), Dim::C(4)}, {});
  g.AddOp({.kind = OpKind::kLinear, .name = "fc", .inputs = {x, w}},
          {{.name = "y", .shape = Tokens(5)}});
  const TensorStates states(g, RegimeOf(Precision::kAmpBf16));
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  // The weight gradient needs x: its bf16 copy (2*3*4 * 2 B) is saved. The input
  // needs no gradient, so the bf16 weight copy (5*4 * 2 B) is only transient.
  EXPECT_EQ(f.saves_input, (std::vector<bool>{true, false}));
  ASSERT_EQ(f.internals.size(), 2u);
  EXPECT_EQ(f.internals[0].bytes, 48);
  EXPECT_EQ(f.internals[0].lifetime, Lifetime::kSaved);
  EXPECT_EQ(f.internals[1].bytes, 40);
  EXPECT_EQ(f.internals[1].lifetime, Lifetime::kTransient);
  EXPECT_EQ(states.Bytes(g, LastOp(g).outputs[0], kEnv), 2 * 3 * 5 * 2);  // bf16 output
  EXPECT_EQ(states[LastOp(g).outputs[0]].dtype, DType::kBF16);

  const BackwardCost b = CostBackward(g, LastOp(g), states, kEnv);
  EXPECT_EQ(b.input_grads, (std::vector<GradFlow>{GradFlow::kNone, GradFlow::kNew}));
  const OpFlops flops = CostFlops(g, LastOp(g), states, kEnv);
  EXPECT_EQ(flops.forward, 2.0 * 30 * 4);
  EXPECT_EQ(flops.backward, 2.0 * 30 * 4);  // weight gradient only
}

TEST(OpCost, LinearOutsideGradModeSavesNothing) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 4);
  TensorId w = g.AddParameter("w", {Dim::C(5), Dim::C(4)}, {});
  g.AddOp({.kind = OpKind::kLinear, .name = "fc", .inputs = {x, w}},
          {{.name = "y", .shape = Tokens(5)}});
  const TensorStates states(g, RegimeOf(Precision::kFp32));
  EXPECT_EQ(CostForward(g, LastOp(g), states, kEnv, true).saves_input,
            (std::vector<bool>{true, true}));
  EXPECT_EQ(CostForward(g, LastOp(g), states, kEnv, false).saves_input,
            (std::vector<bool>{false, false}));
}

TEST(OpCost, LayerNormSavesInputAndFp32Statistics) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 8);
  TensorId w = g.AddParameter("ln.w", {Dim::C(8)}, {});
  TensorId bias = g.AddParameter("ln.b", {Dim::C(8)}, {});
  g.AddOp({.kind = OpKind::kLayerNorm, .name = "ln", .inputs = {x, w, bias}},
          {{.name = "y", .shape = Tokens(8)}});
  const TensorStates states(g, RegimeOf(Precision::kBf16));
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  EXPECT_TRUE(f.saves_input[0]);
  ASSERT_EQ(f.internals.size(), 2u);  // mean and rstd: 6 rows * 4 B each
  EXPECT_EQ(f.internals[0].bytes, 24);
  EXPECT_EQ(f.internals[1].bytes, 24);
  EXPECT_EQ(f.internals[1].lifetime, Lifetime::kSaved);
}

TEST(OpCost, RmsNormInBf16UpcastsToFp32) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 8);
  TensorId w = g.AddParameter("norm.w", {Dim::C(8)}, {});
  g.AddOp({.kind = OpKind::kRmsNorm, .name = "norm", .inputs = {x, w}},
          {{.name = "y", .shape = Tokens(8)}});
  const TensorStates states(g, RegimeOf(Precision::kBf16));
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  // n = 2*3*8 = 48 elements: x32 (192 B, saved), x^2 (192, freed at once), rstd (6 rows,
  // 24 B, saved), normalized fp32 (192, transient), normalized bf16 (96, saved).
  ASSERT_EQ(f.internals.size(), 5u);
  const std::vector<std::pair<int64_t, Lifetime>> expected = {{192, Lifetime::kSaved},
                                                              {192, Lifetime::kEphemeral},
                                                              {24, Lifetime::kSaved},
                                                              {192, Lifetime::kTransient},
                                                              {96, Lifetime::kSaved}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(f.internals[i].bytes, expected[i].first) << i;
    EXPECT_EQ(f.internals[i].lifetime, expected[i].second) << i;
  }
  EXPECT_FALSE(f.saves_input[0]);  // the fp32 copy is saved instead
  // Backward: five fp32 copies of x at once, less the bf16 output gradient and the saved
  // bf16 normalized x freed before them: 5 * 192 - 96 - 96 = 4 fp32 copies (3 in fp32).
  EXPECT_EQ(CostBackward(g, LastOp(g), states, kEnv).workspace_bytes, 4 * 192);
}

TEST(OpCost, DropoutSavesAOneByteMask) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 8);
  g.AddOp({.kind = OpKind::kDropout, .name = "drop", .inputs = {x}, .dropout_p = 0.1},
          {{.name = "y", .shape = Tokens(8)}});
  const TensorStates states(g, RegimeOf(Precision::kFp32));
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  ASSERT_EQ(f.internals.size(), 1u);
  EXPECT_EQ(f.internals[0].bytes, 48);
  EXPECT_EQ(f.internals[0].lifetime, Lifetime::kSaved);
  // Inside a checkpointed block (no grad) the mask is still made, then dropped.
  EXPECT_EQ(CostForward(g, LastOp(g), states, kEnv, false).internals[0].lifetime,
            Lifetime::kTransient);
}

TEST(OpCost, SdpaSavesInputsOutputAndLogsumexp) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 48);  // fused qkv: 3 * 2 heads * 8
  const SymShape heads{Dim::B(), Dim::C(2), Dim::S(), Dim::C(8)};
  auto qkv = SplitQkv(g, x, heads, heads);
  g.AddOp({.kind = OpKind::kSdpa, .name = "sdpa", .inputs = {qkv[0], qkv[1], qkv[2]}},
          {{.name = "o", .shape = heads}});
  const TensorStates states(g, RegimeOf(Precision::kBf16));
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  EXPECT_EQ(f.saves_input, (std::vector<bool>{true, true, true}));
  EXPECT_TRUE(f.saves_output());
  ASSERT_EQ(f.internals.size(), 3u);
  EXPECT_EQ(f.internals[0].bytes, 2 * 2 * 3 * 4);  // fp32 logsumexp [b, heads, s]
  // The philox seed and offset, int64 scalars on the device, saved without dropout too.
  for (size_t i : {1, 2}) {
    EXPECT_EQ(f.internals[i].bytes, 8);
    EXPECT_EQ(f.internals[i].lifetime, Lifetime::kSaved);
  }
  // Backward (flash's mha_bwd): dq_accum fp32 [b, round128(s), heads, d rounded to 32]
  // = 2*128*2*32 * 4 B, and softmax_d fp32 [b, heads, round128(s)] = 2*2*128 * 4 B.
  EXPECT_EQ(CostBackward(g, LastOp(g), states, kEnv).workspace_bytes, 65536 + 2048);
  // The split's backward builds one full-size gradient of x.
  EXPECT_EQ(CostBackward(g, g.op(OpId{1}), states, kEnv).input_grads[0], GradFlow::kNew);
}

// q [b=2, 4 heads, s=3, d=8] with grouped k, v [2, 2 heads, 3, 8], in fp32 on CUDA.
OpGraph GroupedSdpa(AttentionKernel kernel) {
  OpGraph g;
  const SymShape q_shape{Dim::B(), Dim::C(4), Dim::S(), Dim::C(8)};
  const SymShape kv_shape{Dim::B(), Dim::C(2), Dim::S(), Dim::C(8)};
  TensorId x = TrainableActivation(g, 8);
  auto qkv = SplitQkv(g, x, q_shape, kv_shape);
  g.AddOp({.kind = OpKind::kSdpa,
           .name = "sdpa",
           .inputs = {qkv[0], qkv[1], qkv[2]},
           .causal = true,
           .attention_kernel = kernel},
          {{.name = "o", .shape = q_shape}});
  return g;
}

TEST(OpCost, MemoryEfficientSdpaPadsItsLogsumexpTo32Rows) {
  const OpGraph g = GroupedSdpa(AttentionKernel::kMemEfficient);
  const TensorStates states(g, RegimeOf(Precision::kFp32));
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  EXPECT_EQ(f.saves_input, (std::vector<bool>{true, true, true}));
  ASSERT_EQ(f.internals.size(), 3u);  // the logsumexp, then the philox seed and offset
  EXPECT_EQ(f.internals[0].bytes, 2 * 4 * 32 * 4);  // fp32 [b, heads, ceil(s/32)*32]
  // Backward: fp32 staging the size of q, and dK/dV per query head (2 x 2*4*3*8 * 4 B).
  EXPECT_EQ(CostBackward(g, LastOp(g), states, kEnv).workspace_bytes, 768 + 2 * 768);
}

TEST(OpCost, MathSdpaSavesScaledOperandsProbabilitiesAndRepeatedV) {
  const OpGraph g = GroupedSdpa(AttentionKernel::kMath);
  const TensorStates states(g, RegimeOf(Precision::kFp32));
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  EXPECT_EQ(f.saves_input, (std::vector<bool>{false, false, false}));  // copies are saved
  EXPECT_FALSE(f.saves_output());
  int64_t saved = 0, transient = 0;
  for (const InternalBuffer& b : f.internals)
    (b.lifetime == Lifetime::kSaved ? saved : transient) += b.bytes;
  const int64_t q = 2 * 4 * 3 * 8 * 4, scores = 2 * 4 * 3 * 3 * 4;
  // q * sqrt(scale), k^T * sqrt(scale) and v repeated to 4 heads, and the softmax result.
  EXPECT_EQ(saved, 3 * q + scores);
  // The repeated k; the bool ones, tril and logical_not and the fp32 [s, s] causal mask;
  // the scores, _safe_softmax's softmax, eq(-inf) [bool] and all() [b, h, s] bool.
  EXPECT_EQ(transient, q + 3 * 9 + 9 * 4 + 2 * scores + scores / 4 + 2 * 4 * 3);
}

// SDPA over [b=2, 2 heads, s=3, d=8] in bf16 with transformers' bool window mask as its
// fourth input.
OpGraph MaskedSdpa(AttentionKernel kernel) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 48);
  const SymShape heads{Dim::B(), Dim::C(2), Dim::S(), Dim::C(8)};
  TensorId mask =
      g.AddOp({.kind = OpKind::kWindowMask, .name = "window", .inputs = {x}, .sliding_window = 2},
              {{.name = "mask",
                .shape = {Dim::C(1), Dim::C(1), Dim::S(), Dim::S()},
                .fixed_dtype = DType::kBool}})[0];
  auto qkv = SplitQkv(g, x, heads, heads);
  g.AddOp({.kind = OpKind::kSdpa,
           .name = "sdpa",
           .inputs = {qkv[0], qkv[1], qkv[2], mask},
           .attention_kernel = kernel},
          {{.name = "o", .shape = heads}});
  return g;
}

TEST(OpCost, WindowMaskIsOneBoolPatternWithTwoLiveTemporaries) {
  const OpGraph g = MaskedSdpa(AttentionKernel::kCpuFlash);
  const TensorStates states(g, RegimeOf(Precision::kBf16));
  const OpNode& window = g.op(OpId{1});
  EXPECT_EQ(states.Bytes(g, window.outputs[0], kEnv), 9);  // bool [1, 1, s, s]
  EXPECT_FALSE(states[window.outputs[0]].requires_grad);
  const ForwardCost f = CostForward(g, window, states, kEnv, true);
  int64_t transient = 0;
  for (const InternalBuffer& b : f.internals) {
    EXPECT_EQ(b.lifetime, Lifetime::kTransient);
    EXPECT_FALSE(b.per_sample);
    transient += b.bytes;
  }
  // The first AND and the causal comparison (bool [s, s] each), two int64 aranges [s].
  EXPECT_EQ(transient, 2 * 9 + 2 * 3 * 8);
}

TEST(OpCost, MaskedSdpaSavesTheAdditiveMaskOfItsKernel) {
  const int64_t lse = 2 * 2 * 3 * 4, where = 2 * 3 * 3 * 2;  // bf16 [b, 1, s, s]
  auto internals = [](const OpGraph& g, Lifetime lifetime) {
    const TensorStates states(g, RegimeOf(Precision::kBf16));
    const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
    EXPECT_EQ(f.saves_input, (std::vector<bool>{true, true, true, false}));  // not the bool
    int64_t bytes = 0;
    for (const InternalBuffer& b : f.internals) bytes += b.lifetime == lifetime ? b.bytes : 0;
    return bytes;
  };
  // CPU flash and cuDNN keep where(mask, 0, -inf) for backward, beside the logsumexp (and
  // on CUDA the 8-byte philox seed and offset).
  for (auto [k, philox] :
       {std::pair{AttentionKernel::kCpuFlash, 0}, {AttentionKernel::kCudnn, 16}}) {
    EXPECT_EQ(internals(MaskedSdpa(k), Lifetime::kSaved), lse + where + philox);
    EXPECT_EQ(internals(MaskedSdpa(k), Lifetime::kTransient), 0);
  }
  // The memory-efficient kernel at s = 3 pads the mask's rows to 8 and saves the copy.
  const OpGraph efficient = MaskedSdpa(AttentionKernel::kMemEfficient);
  EXPECT_EQ(internals(efficient, Lifetime::kSaved), 2 * 2 * 32 * 4 + 2 * 3 * 8 * 2 + 16);
  EXPECT_EQ(internals(efficient, Lifetime::kTransient), where);
}

TEST(OpCost, RepeatingOneKvHeadForAFusedKernelIsAView) {
  for (auto [kv_heads, kernel, view] : {std::tuple{1, AttentionKernel::kCpuFlash, true},
                                        {1, AttentionKernel::kEager, false},
                                        {2, AttentionKernel::kCudnn, false}}) {
    OpGraph g;
    TensorId x = TrainableActivation(g, 8);
    TensorId k = g.AddOp({.kind = OpKind::kView, .name = "k", .inputs = {x}},
                         {{.name = "k",
                           .shape = {Dim::B(), Dim::C(kv_heads), Dim::S(), Dim::C(8)},
                           .alias_of = x}})[0];
    g.AddOp(
        {.kind = OpKind::kRepeatKv, .name = "repeat", .inputs = {k}, .attention_kernel = kernel},
        {{.name = "k4", .shape = {Dim::B(), Dim::C(4), Dim::S(), Dim::C(8)}}});
    const TensorStates states(g, RegimeOf(Precision::kFp32));
    EXPECT_EQ(CostForward(g, LastOp(g), states, kEnv, true).output_aliases_input, view)
        << kv_heads << " " << AttentionKernelName(kernel);
  }
}

TEST(OpCost, SoftmaxUnderAutocastRunsInFp32) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 3);  // stands in for [b, s, s] scores
  TensorId w = g.AddParameter("w", {Dim::C(3), Dim::C(3)}, {});
  TensorId scores = g.AddOp({.kind = OpKind::kLinear, .name = "fc", .inputs = {x, w}},
                            {{.name = "s", .shape = Tokens(3)}})[0];
  g.AddOp({.kind = OpKind::kSoftmax, .name = "softmax", .inputs = {scores}},
          {{.name = "p", .shape = Tokens(3)}});
  const TensorStates states(g, RegimeOf(Precision::kAmpFp16));
  EXPECT_EQ(states[scores].dtype, DType::kF16);
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  EXPECT_TRUE(f.saves_output());
  ASSERT_EQ(f.internals.size(), 1u);  // fp32 copy of the fp16 scores, freed after
  EXPECT_EQ(f.internals[0].bytes, 18 * 4);
  EXPECT_EQ(f.internals[0].lifetime, Lifetime::kTransient);
  EXPECT_EQ(states[LastOp(g).outputs[0]].dtype, DType::kF32);
}

TEST(OpCost, QloraLinearDequantizesPerCall) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 128);
  TensorId w =
      g.AddParameter("w", {Dim::C(64), Dim::C(128)}, {.trainable = false, .quantized = true});
  g.AddOp({.kind = OpKind::kLinear, .name = "fc", .inputs = {x, w}},
          {{.name = "y", .shape = Tokens(64)}});
  const TensorStates states(g, RegimeOf(Precision::kBf16));
  // 8192 weights: 4096 B of NF4, 128 one-byte absmax, one fp32 second-level absmax, and
  // the QuantState's codes (16 and 256 fp32) and offset (one fp32).
  EXPECT_EQ(states.Bytes(g, w, kEnv), 4096 + 128 + 4 + (16 + 256 + 1) * 4);
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  ASSERT_EQ(f.internals.size(), 1u);
  EXPECT_EQ(f.internals[0].bytes, 8192 * 2 + 128 * 4);  // bf16 weight, fp32 absmax per block
  EXPECT_EQ(f.saves_input, (std::vector<bool>{false, false}));
  const BackwardCost b = CostBackward(g, LastOp(g), states, kEnv);
  EXPECT_EQ(b.input_grads, (std::vector<GradFlow>{GradFlow::kNew, GradFlow::kNone}));
  EXPECT_EQ(b.workspace_bytes, 8192 * 2 + 128 * 4);
}

TEST(OpCost, AddPassesGradientThroughUnlessBroadcast) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 4);
  TensorId pos_table = g.AddParameter("pos", {Dim::C(8), Dim::C(4)}, {});
  TensorId pos_ids = g.AddInput("pos_ids", {Dim::C(1), Dim::S()}, DType::kI64);
  TensorId pos =
      g.AddOp({.kind = OpKind::kEmbedding, .name = "pos", .inputs = {pos_ids, pos_table}},
              {{.name = "p", .shape = {Dim::C(1), Dim::S(), Dim::C(4)}}})[0];
  g.AddOp({.kind = OpKind::kAdd, .name = "add", .inputs = {x, pos}},
          {{.name = "y", .shape = Tokens(4)}});
  const TensorStates states(g, RegimeOf(Precision::kFp32));
  const BackwardCost b = CostBackward(g, LastOp(g), states, kEnv);
  EXPECT_EQ(b.input_grads, (std::vector<GradFlow>{GradFlow::kPassThrough, GradFlow::kNew}));
}

// The remaining rules, each on a [b, s, 8] fp32 activation that requires grad: what is
// saved (per input, and the output) and the workspace, by hand.
TEST(OpCost, SimpleRulesTable) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 8);
  TensorId x2 = TrainableActivation(g, 8);
  TensorId cos =
      g.AddOp({.kind = OpKind::kRopeTables, .name = "rope_tables", .inputs = {x}},
              {{.name = "cos", .shape = Tokens(8)}, {.name = "sin", .shape = Tokens(8)}})[0];
  TensorId sin{cos.value + 1};
  TensorId labels = g.AddInput("labels", {Dim::B(), Dim::S()}, DType::kI64);
  struct Row {
    OpKind kind;
    std::vector<TensorId> inputs;
    std::vector<bool> saves_input;
    bool saves_output;
    int64_t workspace;
  };
  const int64_t x_bytes = 2 * 3 * 8 * 4;  // 192
  const std::vector<Row> rows = {
      {OpKind::kGelu, {x}, {true}, false, 0},
      {OpKind::kGeluTanh, {x}, {true}, false, 0},
      {OpKind::kSilu, {x}, {true}, false, 0},
      {OpKind::kTanh, {x}, {false}, true, 0},
      {OpKind::kMul, {x, x2}, {true, true}, false, 0},
      {OpKind::kAdd, {x, x2}, {false, false}, false, 0},
      {OpKind::kScale, {x}, {false}, false, 0},
      // q * cos + rotate_half(q) * sin: keeps cos and sin, two products beside the output.
      {OpKind::kRope, {x, cos, sin}, {false, true, true}, false, 2 * x_bytes},
      {OpKind::kRepeatKv, {x}, {false}, false, 0},
      {OpKind::kMergeHeads, {x}, {false}, false, 0},
      // matmul * scaling out of place: the unscaled product beside the output.
      {OpKind::kAttnScores, {x, x2}, {true, true}, false, x_bytes},
      {OpKind::kAttnContext, {x, x2}, {true, true}, false, 0},
      {OpKind::kLogSoftmax, {x}, {false}, true, 0},
      {OpKind::kNllLoss, {x, labels}, {false, true}, false, 0},
  };
  const TensorStates states_before(g, RegimeOf(Precision::kFp32));
  for (const Row& row : rows) {
    SCOPED_TRACE(OpKindName(row.kind));
    OpGraph h = g;
    const SymShape out_shape = row.kind == OpKind::kNllLoss ? SymShape{} : Tokens(8);
    h.AddOp({.kind = row.kind, .name = "op", .inputs = row.inputs},
            {{.name = "out", .shape = out_shape}});
    const TensorStates states(h, RegimeOf(Precision::kFp32));
    const ForwardCost f = CostForward(h, LastOp(h), states, kEnv, true);
    EXPECT_EQ(f.saves_input, row.saves_input);
    EXPECT_EQ(f.saves_output(), row.saves_output);
    EXPECT_EQ(f.workspace_bytes, row.workspace);
    if (row.kind == OpKind::kNllLoss) {
      // nll_loss_forward's second output, the fp32 total_weight, is saved for backward.
      ASSERT_EQ(f.internals.size(), 1u);
      EXPECT_EQ(f.internals[0].bytes, 4);
      EXPECT_EQ(f.internals[0].lifetime, Lifetime::kSaved);
    } else {
      EXPECT_TRUE(f.internals.empty());
    }
  }
  EXPECT_FALSE(states_before[cos].requires_grad);  // rotary tables are computed without grad
}

TEST(OpCost, CastToFp32IsAViewOnlyWhenAlreadyFp32) {
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    OpGraph g;
    TensorId x = TrainableActivation(g, 8);
    g.AddOp({.kind = OpKind::kCastF32, .name = "float", .inputs = {x}},
            {{.name = "x32", .shape = Tokens(8)}});
    const TensorStates states(g, RegimeOf(p));
    EXPECT_EQ(CostForward(g, LastOp(g), states, kEnv, true).output_aliases_input,
              p == Precision::kFp32);
    EXPECT_EQ(CostBackward(g, LastOp(g), states, kEnv).input_grads[0],
              p == Precision::kFp32 ? GradFlow::kPassThrough : GradFlow::kNew);
    EXPECT_EQ(states.Bytes(g, LastOp(g).outputs[0], kEnv), 2 * 3 * 8 * 4);
  }
}

TEST(OpCost, EmbeddingSavesIndicesOnlyForATrainableTable) {
  for (bool trainable : {true, false}) {
    OpGraph g;
    TensorId ids = g.AddInput("ids", {Dim::B(), Dim::S()}, DType::kI64);
    TensorId table = g.AddParameter("table", {Dim::C(16), Dim::C(8)}, {.trainable = trainable});
    g.AddOp({.kind = OpKind::kEmbedding, .name = "embed", .inputs = {ids, table}},
            {{.name = "x", .shape = Tokens(8)}});
    const TensorStates states(g, RegimeOf(Precision::kBf16));
    EXPECT_EQ(CostForward(g, LastOp(g), states, kEnv, true).saves_input,
              (std::vector<bool>{trainable, false}));
    EXPECT_EQ(states.Bytes(g, LastOp(g).outputs[0], kEnv), 2 * 3 * 8 * 2);  // the table's dtype
    EXPECT_EQ(states[LastOp(g).outputs[0]].requires_grad, trainable);
  }
}

OptimizerParamCost Cost(OptimizerKind kind, const SymShape& shape, DType state_dtype,
                        bool master_weights) {
  return CostOptimizer(kind, OptimizerImpl::kForLoop, shape, state_dtype, master_weights, false);
}

TEST(OptimizerCost, StatesAndTemporariesPerParameter) {
  const SymShape w{Dim::C(5), Dim::C(4)};
  const OptimizerParamCost adamw = Cost(OptimizerKind::kAdamW, w, DType::kF32, false);
  EXPECT_EQ(adamw.state_bytes, (std::vector<int64_t>{80, 80}));
  EXPECT_EQ(adamw.step_temp_bytes, 160);
  EXPECT_EQ(Cost(OptimizerKind::kAdamW, w, DType::kBF16, false).state_bytes,
            (std::vector<int64_t>{40, 40}));
  EXPECT_EQ(Cost(OptimizerKind::kAdamW, w, DType::kF32, true).step_temp_bytes, 160 + 80);
  EXPECT_TRUE(Cost(OptimizerKind::kSgd, w, DType::kF32, false).state_bytes.empty());
  EXPECT_EQ(Cost(OptimizerKind::kSgdMomentum, w, DType::kF32, false).state_bytes,
            (std::vector<int64_t>{80}));
  // Adafactor factors a [6, 4] matrix into 6 row and 4 column statistics.
  EXPECT_EQ(Cost(OptimizerKind::kAdafactor, {Dim::C(6), Dim::C(4)}, DType::kF32, false).state_bytes,
            (std::vector<int64_t>{24, 16}));
  // 8-bit AdamW: 1 B per value plus an fp32 absmax per 256 values, per state; small
  // tensors keep 32-bit states.
  EXPECT_EQ(Cost(OptimizerKind::kAdamW8bit, {Dim::C(8192)}, DType::kF32, false).state_bytes,
            (std::vector<int64_t>{8192 + 128, 8192 + 128}));
  EXPECT_EQ(Cost(OptimizerKind::kAdamW8bit, w, DType::kF32, false).state_bytes,
            (std::vector<int64_t>{80, 80}));
}

// torch.optim's AdamW: foreach makes sqrt(exp_avg_sq) of the whole group at once (each
// parameter's share is one state), fused makes nothing, and every parameter gets a
// 0-d fp32 step tensor.
TEST(OptimizerCost, ImplementationsOfAdamW) {
  const SymShape w{Dim::C(5), Dim::C(4)};
  const OptimizerParamCost foreach =
      CostOptimizer(OptimizerKind::kAdamW, OptimizerImpl::kForeach, w, DType::kF32, false, true);
  EXPECT_EQ(foreach.step_temp_bytes, 0);
  EXPECT_EQ(foreach.group_temp_bytes, 80);
  EXPECT_EQ(foreach.step_tensor_bytes, 4);
  const OptimizerParamCost fused =
      CostOptimizer(OptimizerKind::kAdamW, OptimizerImpl::kFused, w, DType::kF32, false, true);
  EXPECT_EQ(fused.step_temp_bytes + fused.group_temp_bytes, 0);
  EXPECT_EQ(
      CostOptimizer(OptimizerKind::kAdamW, OptimizerImpl::kForLoop, w, DType::kF32, false, false)
          .step_tensor_bytes,
      0);
}

// ---- mixture of experts --------------------------------------------------------------
// k = 2 experts per token: 2 * 3 * 2 = 12 token-expert pairs at (b, s) = (2, 3).
constexpr int64_t kTopK = 2;
SymShape Pairs() { return {Dim::B(), Dim::S(), Dim::C(kTopK)}; }
SymShape PairRows(int64_t n) { return {Dim::B(), Dim::S(), Dim::C(kTopK), Dim::C(n)}; }

TEST(OpCost, TopKSavesOnlyItsIntegerIndices) {
  OpGraph g;
  TensorId probs = TrainableActivation(g, 8);
  const auto top = g.AddOp({.kind = OpKind::kTopK, .name = "topk", .inputs = {probs}},
                           {{.name = "values", .shape = Pairs()},
                            {.name = "indices", .shape = Pairs(), .fixed_dtype = DType::kI64}});
  const TensorStates states(g, RegimeOf(Precision::kFp32));
  EXPECT_TRUE(states[top[0]].requires_grad);
  EXPECT_FALSE(states[top[1]].requires_grad);  // autograd never tracks integer tensors
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  EXPECT_EQ(f.saved_outputs, 2u);  // output 1, the indices
  EXPECT_EQ(CostForward(g, LastOp(g), states, kEnv, false).saved_outputs, 0u);
  EXPECT_EQ(CostBackward(g, LastOp(g), states, kEnv).input_grads,
            (std::vector<GradFlow>{GradFlow::kNew}));  // zeros of the input's size
}

TEST(OpCost, InPlaceRenormalizationKeepsTheValuesBeforeItOnlyWhenRecorded) {
  OpGraph g;
  TensorId probs = TrainableActivation(g, 8);
  TensorId values = g.AddOp({.kind = OpKind::kTopK, .name = "topk", .inputs = {probs}},
                            {{.name = "values", .shape = Pairs()},
                             {.name = "indices", .shape = Pairs(), .fixed_dtype = DType::kI64}})[0];
  g.AddOp({.kind = OpKind::kRenormalize, .name = "renorm", .inputs = {values}},
          {{.name = "w", .shape = Pairs()}});
  const TensorStates states(g, RegimeOf(Precision::kFp32));
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  EXPECT_TRUE(f.output_aliases_input);
  ASSERT_EQ(f.internals.size(), 2u);
  EXPECT_EQ(f.internals[0].bytes, 2 * 3 * 4);  // the sum, [b, s, 1] fp32
  EXPECT_EQ(f.internals[0].lifetime, Lifetime::kSaved);
  EXPECT_EQ(f.internals[1].bytes, 12 * 4);  // the clone of the values
  EXPECT_EQ(f.internals[1].lifetime, Lifetime::kSaved);
  const ForwardCost no_grad = CostForward(g, LastOp(g), states, kEnv, false);
  ASSERT_EQ(no_grad.internals.size(), 1u);
  EXPECT_EQ(no_grad.internals[0].lifetime, Lifetime::kTransient);
  EXPECT_EQ(CostBackward(g, LastOp(g), states, kEnv).workspace_bytes, 3 * 12 * 4);
}

TEST(OpCost, RestoringTheOrderCopiesTheExpandedGradientOfTheSum) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 4);
  TensorId perm = g.AddInput("perm", Pairs(), DType::kI64);
  TensorId rows = g.AddOp(
      {.kind = OpKind::kGatherRows, .name = "gather", .inputs = {x, perm}, .row_divisor = kTopK},
      {{.name = "rows", .shape = PairRows(4)}})[0];
  const OpId gather{g.num_ops() - 1};
  TensorId restored = g.AddOp({.kind = OpKind::kGatherRows,
                               .name = "restore",
                               .inputs = {rows, perm},
                               .inverse_permutation = true},
                              {{.name = "restored", .shape = PairRows(4)}})[0];
  const OpId restore{g.num_ops() - 1};
  g.AddOp({.kind = OpKind::kSumTopK, .name = "sum", .inputs = {restored}},
          {{.name = "out", .shape = Tokens(4)}});
  const TensorStates states(g, RegimeOf(Precision::kFp32));
  // perm // k: an int64 index per pair, saved by IndexBackward0.
  const ForwardCost fg = CostForward(g, g.op(gather), states, kEnv, true);
  ASSERT_EQ(fg.internals.size(), 1u);
  EXPECT_EQ(fg.internals[0].bytes, 12 * 8);
  EXPECT_EQ(fg.internals[0].lifetime, Lifetime::kSaved);
  EXPECT_EQ(CostBackward(g, g.op(gather), states, kEnv).workspace_bytes, 0);
  // The inverse permutation is saved; the arange scattered into it is not.
  const ForwardCost fr = CostForward(g, g.op(restore), states, kEnv, true);
  ASSERT_EQ(fr.internals.size(), 2u);
  EXPECT_EQ(fr.internals[0].lifetime, Lifetime::kSaved);
  EXPECT_EQ(fr.internals[1].lifetime, Lifetime::kEphemeral);
  EXPECT_EQ(CostBackward(g, g.op(restore), states, kEnv).workspace_bytes, 12 * 4 * 4);
  const BackwardCost sum = CostBackward(g, LastOp(g), states, kEnv);
  EXPECT_EQ(sum.input_grads, (std::vector<GradFlow>{GradFlow::kPassThrough}));
}

TEST(OpCost, GroupedMmCastsItsInputToTheFrozenExpertsDtype) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 4);  // fp32 under amp
  TensorId rows = g.AddOp({.kind = OpKind::kGatherRows,
                           .name = "gather",
                           .inputs = {x, g.AddInput("perm", Pairs(), DType::kI64)},
                           .row_divisor = kTopK},
                          {{.name = "rows", .shape = PairRows(4)}})[0];
  TensorId w = g.AddParameter("experts", {Dim::C(3), Dim::C(5), Dim::C(4)}, {.trainable = false});
  TensorId offsets = g.AddInput("offsets", {Dim::C(3)}, DType::kI32);
  g.AddOp({.kind = OpKind::kGroupedMm, .name = "gmm", .inputs = {rows, w, offsets}},
          {{.name = "y", .shape = PairRows(5)}});
  TrainingConfig lora;
  lora.precision = Precision::kAmpBf16;
  lora.fine_tune.mode = FineTuneMode::kLora;
  const TensorStates states(g, RegimeOf(Precision::kAmpBf16), CostTargetOf(lora));
  ASSERT_EQ(states[w].dtype, DType::kBF16);
  EXPECT_EQ(states[LastOp(g).outputs[0]].dtype, DType::kBF16);  // not autocast's choice
  const ForwardCost f = CostForward(g, LastOp(g), states, kEnv, true);
  // x.to(bf16) is not saved: the frozen weights need no gradient, so x is not kept.
  EXPECT_EQ(f.saves_input, (std::vector<bool>{false, true, true}));
  ASSERT_EQ(f.internals.size(), 1u);
  EXPECT_EQ(f.internals[0].bytes, 12 * 4 * 2);
  EXPECT_EQ(f.internals[0].lifetime, Lifetime::kTransient);
  EXPECT_EQ(CostBackward(g, LastOp(g), states, kEnv).input_grads,
            (std::vector<GradFlow>{GradFlow::kNew, GradFlow::kNone, GradFlow::kNone}));
  EXPECT_EQ(CostFlops(g, LastOp(g), states, kEnv).forward, 2.0 * 12 * 5 * 4);
}

TEST(OpCost, BroadcastProductLeavesAFullSizeTemporaryInBackward) {
  OpGraph g;
  TensorId x = TrainableActivation(g, 4);
  TensorId rows = g.AddOp({.kind = OpKind::kGatherRows,
                           .name = "gather",
                           .inputs = {x, g.AddInput("perm", Pairs(), DType::kI64)},
                           .row_divisor = kTopK},
                          {{.name = "rows", .shape = PairRows(4)}})[0];
  TensorId weights = g.AddOp({.kind = OpKind::kGatherRows,
                              .name = "weights",
                              .inputs = {rows, g.AddInput("perm2", Pairs(), DType::kI64)}},
                             {{.name = "column", .shape = PairRows(1)}})[0];
  g.AddOp({.kind = OpKind::kMul, .name = "weighted", .inputs = {rows, weights}},
          {{.name = "y", .shape = PairRows(4)}});
  const TensorStates states(g, RegimeOf(Precision::kFp32));
  // dY * rows at [pairs, 4] before it is summed to the column's [pairs, 1].
  EXPECT_EQ(CostBackward(g, LastOp(g), states, kEnv).workspace_bytes, 12 * 4 * 4);
}

}  // namespace
}  // namespace headroom
