// Small graphs whose memory timelines are worked out by hand and checked exactly.
#include <gtest/gtest.h>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/simulate/live_bytes.h"
#include "planner/simulate/step_simulator.h"
#include "tests/timeline_probe.h"

namespace headroom {
namespace {

// ids -> embedding(E [vocab, width]) -> linear(W [classes, width], or E itself when
// `classes` is 0: a tied weight) -> float -> log_softmax -> nll
OpGraph EmbedLinearLossGraph(int64_t vocab, int64_t width, int64_t classes) {
  OpGraph g;
  const SymShape tokens{Dim::B(), Dim::S()};
  TensorId ids = g.AddInput("ids", tokens, DType::kI64);
  TensorId labels = g.AddInput("labels", tokens, DType::kI64);
  TensorId e_w = g.AddParameter("E", {Dim::C(vocab), Dim::C(width)}, {});
  TensorId w = classes > 0 ? g.AddParameter("W", {Dim::C(classes), Dim::C(width)}, {}) : e_w;
  TensorId e = g.AddOp({.kind = OpKind::kEmbedding, .name = "embed", .inputs = {ids, e_w}},
                       {{.name = "e", .shape = {Dim::B(), Dim::S(), Dim::C(width)}}})[0];
  const SymShape logits_shape{Dim::B(), Dim::S(), Dim::C(classes > 0 ? classes : vocab)};
  TensorId y = g.AddOp({.kind = OpKind::kLinear, .name = "fc", .inputs = {e, w}},
                       {{.name = "y", .shape = logits_shape}})[0];
  TensorId y32 = g.AddOp({.kind = OpKind::kCastF32, .name = "float", .inputs = {y}},
                         {{.name = "y32", .shape = logits_shape}})[0];
  TensorId lp = g.AddOp({.kind = OpKind::kLogSoftmax, .name = "log_softmax", .inputs = {y32}},
                        {{.name = "lp", .shape = logits_shape}})[0];
  TensorId loss = g.AddOp({.kind = OpKind::kNllLoss, .name = "nll", .inputs = {lp, labels}},
                          {{.name = "loss", .shape = {}}})[0];
  g.SetLoss(loss);
  g.CheckWellFormed();
  return g;
}

// ids -> embedding(E [4, 2]) -> linear(W [3, 2]) -> float -> log_softmax -> nll
OpGraph TinyClassifierGraph() { return EmbedLinearLossGraph(4, 2, 3); }

// fp32, b = 1, s = 2: small enough to follow every byte by hand.
TrainingConfig TinyConfig(OptimizerKind optimizer) {
  TrainingConfig config;
  config.micro_batch = 1;
  config.seq_len = 2;
  config.precision = Precision::kFp32;
  config.optimizer = optimizer;
  config.stack = Stack::kHeadroom;  // LibTorch's optimizers: states created per parameter
  return config;
}

std::vector<int64_t> LiveAfterEachEvent(const Timeline& t) {
  LiveBytes live(t);
  std::vector<int64_t> out;
  for (const MemoryEvent& e : t.events) {
    ReplayEvent(e, live);
    out.push_back(live.live().current);
  }
  return out;
}

// ids -> embedding(E [16, 4]) -> linear(E, tied): the tied weight gets two gradients in
// one backward, the linear's first.
OpGraph TiedEmbeddingGraph() { return EmbedLinearLossGraph(16, 4, 0); }

// The most gradient-category bytes live at once during the first step.
int64_t MostGradientBytes(const Timeline& t) {
  int64_t live = 0, most = 0;
  for (const MemoryEvent& e : t.events) {
    if (e.category != Category::kGradients) continue;
    live += e.kind == MemoryEvent::Kind::kAlloc ? e.bytes : -e.bytes;
    most = std::max(most, live);
  }
  return most;
}

// The engine sums a tied weight's two gradients in its input buffer: out of place when the
// first is the linear's weight gradient (TBackward0's view of the product: its storage
// is shared), so both and the sum live at once; in place into autocast's fresh fp32 copy
// (ToCopyBackward0) under AMP (input_buffer.cpp, can_accumulate_inplace).
TEST(StepSimulator, TiedWeightGradientsSumOutOfPlaceInFp32AndInPlaceUnderAutocast) {
  const OpGraph g = TiedEmbeddingGraph();
  constexpr int64_t kWeightFp32 = 16 * 4 * 4;
  TrainingConfig config = TinyConfig(OptimizerKind::kSgd);
  EXPECT_EQ(MostGradientBytes(SimulateSteps(g, config, {}, {.steps = 1})), 3 * kWeightFp32);
  config.precision = Precision::kAmpBf16;
  EXPECT_EQ(MostGradientBytes(SimulateSteps(g, config, {}, {.steps = 1})), 2 * kWeightFp32);
}

// fp32, b = 1, s = 2, SGD (no optimizer state), one step. Live bytes after each event
// (one # per 8 bytes), worked out by hand:
//
//   alloc E                        32 ####
//   alloc W                        56 #######
//   alloc ids                      72 #########
//   alloc labels                   88 ###########
//   embed: alloc e                104 #############        (embedding saves ids)
//   fc: alloc y                   128 ################     (fc saves e)
//   log_softmax: alloc lp         152 ###################  (saves its output)
//   log_softmax: free y           128 ################     (float was a view of y)
//   nll: alloc total_weight       132 ################     (saved, with the labels)
//   nll: alloc loss               136 #################
//   bwd: alloc grad(loss)         140 #################
//   bwd: free loss                136 #################
//   nll: alloc grad(lp)           160 #################### <- peak: weights 56, ids 16,
//   nll: free total_weight        156 ###################     labels 16, e 16, lp 24,
//   nll: free labels              140 #################       total_weight 4, grad(loss)
//   nll: free grad(loss)          136 #################       4, grad(lp) 24
//   log_softmax: alloc grad(y32)  160 #################### (the same bytes again)
//   log_softmax: free lp          136 #################
//   log_softmax: free grad(lp)    112 ##############
//   fc: alloc grad(e)             128 ################     (float passed grad(y32) through)
//   fc: alloc W.grad              152 ###################
//   fc: free e                    136 #################
//   fc: free grad(y)              112 ##############
//   embed: alloc E.grad           144 ##################
//   embed: free ids               128 ################
//   embed: free grad(e)           112 ##############
//   zero_grad: free E.grad         80 ##########
//   zero_grad: free W.grad         56 #######
TEST(StepSimulator, TinyClassifierTimelineByHand) {
  const OpGraph g = TinyClassifierGraph();
  TrainingConfig config = TinyConfig(OptimizerKind::kSgd);
  const Timeline t = SimulateSteps(g, config, {}, {.steps = 1});
  const std::vector<int64_t> expected = {
      32,  56,                       // setup: E, W
      72,  88,  104, 128, 152, 128,  // ids, labels, e, y, lp, free y
      132, 136,                      // nll: total_weight, loss
      140,                           // grad(loss): the seed (loss and seed held to the end)
      164, 160, 144,                 // nll: grad(lp), total_weight, labels freed
      168, 144, 120,                 // log_softmax: grad(y32), lp freed, grad(lp) freed
      136, 160, 144, 120,            // fc: grad(e), W.grad, e freed, grad(y) freed
      152, 136, 120,                 // embedding: E.grad, ids freed, grad(e) freed
      116, 112,                      // backward returns: the seed, then the loss freed
      80,  56};                      // zero_grad: E.grad, then W.grad
  EXPECT_EQ(LiveAfterEachEvent(t), expected);

  LiveBytes live(t);
  Replay(t, live);
  EXPECT_EQ(live.live().peak, 168);
  EXPECT_EQ(t.phases[live.peak_phase()].kind, Phase::Kind::kBackward);
  EXPECT_EQ(g.op(t.phases[live.peak_phase()].op).name, "log_softmax");
  // Weights 56; activations: ids 16, e 16, lp 24 and the loss 4 = 60; temporaries: the
  // seed 4, grad(lp) 24, grad(y32) 24 = 52.
  const CategoryBytes& at_peak = live.breakdown_at_peak();
  EXPECT_EQ(at_peak[static_cast<int>(Category::kWeights)], 56);
  EXPECT_EQ(at_peak[static_cast<int>(Category::kActivations)], 60);
  EXPECT_EQ(at_peak[static_cast<int>(Category::kTemporaries)], 52);
}

// With AdamW the first step allocates both moments (2 x 56 B) lazily, with a 2 x numel
// temporary per parameter; the second step starts with them.
TEST(StepSimulator, OptimizerStatesAppearAtTheFirstStep) {
  const OpGraph g = TinyClassifierGraph();
  TrainingConfig config = TinyConfig(OptimizerKind::kAdamW);
  const Timeline t = SimulateSteps(g, config, {});
  LiveBytes live(t);
  Replay(t, live);
  // Step 1 peak: the backward peak (168). Optimizer step of step 1: weights 56 + grads
  // 56 + E states 64 + temp 64 = 240, then W states 48 + temp 48 -> 56+56+64+48+48 = 272.
  EXPECT_EQ(live.peak_by_step().at(1), 272);
  // Step 2: states (112) live throughout: backward peak 168 + 112 = 280; optimizer
  // step 56 + 56 + 112 + 64 (E's temp) = 288.
  EXPECT_EQ(live.peak_by_step().at(2), 288);
  EXPECT_EQ(live.live().current, 56 + 112);  // weights and states remain
}

// torch.optim (a plain PyTorch loop) creates every parameter's states and its 4-byte
// step tensor (_init_group) before it updates any parameter. Its foreach
// implementation then takes sqrt(exp_avg_sq) of both parameters at once. The step tensor
// is on the parameter's device only for fused AdamW (torch/optim/adam.py _init_group:
// `torch.tensor(0.0, ..., device="cpu")` otherwise): in GPU memory for fused alone, in
// the CPU's for every implementation.
int64_t PeakOfStep(const OpGraph& g, const TrainingConfig& config, int step,
                   int64_t* live_after = nullptr) {
  const Timeline t = SimulateSteps(g, config, {});
  LiveBytes live(t);
  Replay(t, live);
  if (live_after) *live_after = live.live().current;
  return live.peak_by_step().at(step);
}

// A Python loop holds its batch until loss.backward() returns; headroom's runtime lets
// each input go at its last use. Here the labels, a tensor of their own in the batch: nll
// saves them until its backward, after which the loop still holds them through the
// linear's backward, where step 2 peaks at 280 (weights 56, states 112, the rest
// activations and gradients) + 16, above the optimizer step's 288. The ids change
// nothing: the embedding's backward reads them, so autograd holds them to its end.
TEST(StepSimulator, APythonLoopHoldsItsBatchThroughTheBackward) {
  OpGraph g = TinyClassifierGraph();
  ASSERT_EQ(g.tensor(TensorId{1}).name, "labels");
  g.MarkBatchInput(TensorId{1});
  TrainingConfig config = TinyConfig(OptimizerKind::kAdamW);
  config.optimizer_impl = OptimizerImpl::kForLoop;
  config.stack = Stack::kPytorch;
  EXPECT_EQ(PeakOfStep(g, config, 2), 280 + 16);
  config.stack = Stack::kHeadroom;
  EXPECT_EQ(PeakOfStep(g, config, 2), 288);
  OpGraph ids_only = TinyClassifierGraph();
  ids_only.MarkBatchInput(TensorId{0});
  config.stack = Stack::kPytorch;
  EXPECT_EQ(PeakOfStep(ids_only, config, 2), 288);
}

TEST(StepSimulator, TorchOptimCreatesAllStatesBeforeTheUpdates) {
  const OpGraph g = TinyClassifierGraph();
  TrainingConfig config = TinyConfig(OptimizerKind::kAdamW);
  config.stack = Stack::kPytorch;
  config.optimizer_impl = OptimizerImpl::kForLoop;
  ASSERT_TRUE(config.kernels.cuda);
  int64_t live_after = 0;
  // Step 1: weights 56 + grads 56 + states 112 = 224, then E's temporary 64 -> 288 (W's
  // 48 after it is freed). The step tensors are host tensors.
  EXPECT_EQ(PeakOfStep(g, config, 1, &live_after), 288);
  EXPECT_EQ(PeakOfStep(g, config, 2), 288);
  EXPECT_EQ(live_after, 56 + 112);

  config.optimizer_impl = OptimizerImpl::kForeach;  // 224 + sqrt of both: 32 + 24
  EXPECT_EQ(PeakOfStep(g, config, 1), 224 + 56);

  config.optimizer_impl = OptimizerImpl::kFused;  // no temporaries; steps on the device
  EXPECT_EQ(PeakOfStep(g, config, 1, &live_after), 224 + 8);
  EXPECT_EQ(live_after, 56 + 112 + 8);

  config.kernels.cuda = false;  // on the CPU the host is the device
  config.optimizer_impl = OptimizerImpl::kForLoop;
  EXPECT_EQ(PeakOfStep(g, config, 1, &live_after), 296);
  EXPECT_EQ(live_after, 56 + 112 + 8);
}

TEST(StepSimulator, GradientAccumulationKeepsGradsAcrossMicroBatches) {
  const OpGraph g = TinyClassifierGraph();
  TrainingConfig config = TinyConfig(OptimizerKind::kSgd);
  config.grad_accum_steps = 2;
  const Timeline t = SimulateSteps(g, config, {}, {.steps = 1});
  LiveBytes live(t);
  Replay(t, live);
  // Micro-batch 2 runs with the 56 B of .grad from micro-batch 1 live: the backward
  // peak of micro-batch 1 is 168; in micro-batch 2 at the same point 168 + 56 = 224.
  EXPECT_EQ(live.live().peak, 224);
  EXPECT_EQ(t.phases[live.peak_phase()].micro_batch, 2);
}

int64_t ActivationsAtBackwardStart(const OpGraph& g, const TrainingConfig& config,
                                   const std::vector<bool>& ckpt) {
  const Timeline t = SimulateSteps(g, config, ckpt, {.steps = 1});
  return BreakdownAtBackwardStart(t)[static_cast<int>(Category::kActivations)];
}

// Checkpointing every block keeps only each block's input (b*s*h*4 B in fp32) through
// the forward: one more block adds exactly that.
TEST(StepSimulator, CheckpointedBlocksKeepOnlyTheirInput) {
  auto spec = LoadCatalogModel("tiny-llama");
  ASSERT_TRUE(spec.ok());
  TrainingConfig config;
  config.micro_batch = 2;
  config.seq_len = 16;
  config.precision = Precision::kFp32;
  auto one = *spec, two = *spec;
  one.num_layers = 1;
  two.num_layers = 2;
  const OpGraph g1 = *BuildGraph(one, {}), g2 = *BuildGraph(two, {});
  const int64_t block_input = 2 * 16 * 64 * 4;
  EXPECT_EQ(ActivationsAtBackwardStart(g2, config, {true, true}) -
                ActivationsAtBackwardStart(g1, config, {true}),
            block_input);
  // Without checkpointing one more block keeps far more than its input.
  EXPECT_GT(ActivationsAtBackwardStart(g2, config, {false, false}) -
                ActivationsAtBackwardStart(g1, config, {false}),
            4 * block_input);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// Under AMP a LoRA model's frozen base is loaded in bf16 (2 B per weight) while its
// adapters stay fp32 (4 B), and only the adapters get gradients and AdamW states.
TEST(StepSimulator, LoraUnderAmpStoresFrozenWeightsIn16Bit) {
  const ModelSpec spec = *LoadCatalogModel("tiny-llama");
  TrainingConfig config;
  config.precision = Precision::kAmpBf16;
  config.seq_len = 16;
  config.fine_tune = {.mode = FineTuneMode::kLora, .lora_rank = 4, .lora_targets = {"q", "v"}};
  const OpGraph g = *BuildGraph(spec, {.fine_tune = config.fine_tune});
  const Timeline t = SimulateSteps(g, config, {false, false}, {.steps = 1});
  LiveBytes live(t);
  Replay(t, live);
  const int64_t adapters = g.TrainableParameterCount();
  const int64_t frozen = g.ParameterCount() - adapters;
  // Per layer: q (64 -> 64) and v (64 -> 2 kv heads x 16 = 32), each A [4, in] + B [out, 4].
  EXPECT_EQ(adapters, 2 * ((4 * 64 + 64 * 4) + (4 * 64 + 32 * 4)));
  EXPECT_EQ(live.current_breakdown()[static_cast<int>(Category::kWeights)],
            2 * frozen + 4 * adapters);
  // Two fp32 moments per adapter value; torch.optim's step tensors are host tensors on a
  // GPU (foreach AdamW, the default).
  EXPECT_EQ(live.current_breakdown()[static_cast<int>(Category::kOptimizer)], 8 * adapters);
}

}  // namespace
}  // namespace headroom
