// What a Python object among the checkpointed blocks' arguments keeps alive
// (BlockSegment::kept_by_arguments, planner/simulate/internal/kept_by_arguments.h), on a
// graph small enough to follow by hand.
#include <gtest/gtest.h>

#include "planner/simulate/live_bytes.h"
#include "planner/simulate/step_simulator.h"
#include "tests/timeline_probe.h"

namespace headroom {
namespace {

constexpr int64_t kWidth = 8;
constexpr int64_t kMicroBatch = 2, kSeqLen = 4;
constexpr int64_t kHidden = kMicroBatch * kSeqLen * kWidth * 4;  // one fp32 activation

// ids -> embedding -> two blocks of three linears (a = x W0, k = a W1, y = k W2) ->
// linear to 16 classes -> log_softmax -> nll. `keeper`: the block that writes its `k`
// into its arguments (-1: none).
OpGraph TwoBlockGraph(int keeper) {
  OpGraph g;
  const SymShape tokens{Dim::B(), Dim::S()};
  const SymShape hidden{Dim::B(), Dim::S(), Dim::C(kWidth)};
  const TensorId ids = g.AddInput("ids", tokens, DType::kI64);
  const TensorId labels = g.AddInput("labels", tokens, DType::kI64);
  const TensorId table = g.AddParameter("E", {Dim::C(16), Dim::C(kWidth)}, {});
  TensorId x = g.AddOp({.kind = OpKind::kEmbedding, .name = "embed", .inputs = {ids, table}},
                       {{.name = "e", .shape = hidden}})[0];
  const auto linear = [&](const std::string& name, TensorId in) {
    const TensorId w = g.AddParameter(name + ".weight", {Dim::C(kWidth), Dim::C(kWidth)}, {});
    return g.AddOp({.kind = OpKind::kLinear, .name = name, .inputs = {in, w}},
                   {{.name = name, .shape = hidden}})[0];
  };
  for (int b = 0; b < 2; ++b) {
    const std::string p = "layers." + std::to_string(b) + ".";
    g.BeginBlock(x);
    const TensorId a = linear(p + "a", x);
    const TensorId k = linear(p + "k", a);
    x = linear(p + "y", k);
    g.EndBlock(x);
    if (b == keeper) g.KeepByArguments({k});
  }
  const SymShape logits_shape{Dim::B(), Dim::S(), Dim::C(16)};
  const TensorId w = g.AddParameter("head", {Dim::C(16), Dim::C(kWidth)}, {});
  const TensorId y = g.AddOp({.kind = OpKind::kLinear, .name = "head", .inputs = {x, w}},
                             {{.name = "logits", .shape = logits_shape}})[0];
  const TensorId lp = g.AddOp({.kind = OpKind::kLogSoftmax, .name = "log_softmax", .inputs = {y}},
                              {{.name = "lp", .shape = logits_shape}})[0];
  g.SetLoss(g.AddOp({.kind = OpKind::kNllLoss, .name = "nll", .inputs = {lp, labels}},
                    {{.name = "loss", .shape = {}}})[0]);
  g.CheckWellFormed();
  return g;
}

TrainingConfig Fp32PythonLoop() {
  TrainingConfig config;
  config.micro_batch = kMicroBatch;
  config.seq_len = kSeqLen;
  config.precision = Precision::kFp32;
  config.stack = Stack::kPytorch;  // torch.utils.checkpoint without reentrant
  return config;
}

Timeline Simulate(int keeper, std::vector<bool> checkpointed) {
  return SimulateSteps(TwoBlockGraph(keeper), Fp32PythonLoop(), checkpointed, {.steps = 1});
}

int64_t ActivationsAtBackwardStart(const Timeline& t) {
  return BreakdownAtBackwardStart(t)[static_cast<int>(Category::kActivations)];
}

// The live bytes just before the first event of `block`'s recomputation.
int64_t LiveAtRecomputeOf(const Timeline& t, int block) {
  LiveBytes live(t);
  for (const MemoryEvent& e : t.events) {
    const Phase& p = t.phases[e.phase];
    if (p.kind == Phase::Kind::kRecompute && p.block == block) break;
    ReplayEvent(e, live);
  }
  return live.live().current;
}

// The first forward's `k` outlives its block: the arguments hold it until the block's
// recomputation writes the entry again, so the backward starts with it.
TEST(KeptByArguments, TheFirstForwardsWriteLivesUntilTheRecomputation) {
  EXPECT_EQ(ActivationsAtBackwardStart(Simulate(0, {true, true})) -
                ActivationsAtBackwardStart(Simulate(-1, {true, true})),
            kHidden);
}

// Block 1's recomputed `k` keeps its autograd graph, with what the ops upstream of it
// saved (its input x for `a`, `a` for `k`), until the arguments go after block 0's
// backward: three activations more when block 0 recomputes. Block 1's first `k` is gone
// by then (replaced), as the plain graph's is.
TEST(KeptByArguments, TheRecomputedWriteKeepsItsGraphUntilTheFirstCheckpointedBlock) {
  EXPECT_EQ(LiveAtRecomputeOf(Simulate(1, {true, true}), 0) -
                LiveAtRecomputeOf(Simulate(-1, {true, true}), 0),
            3 * kHidden);
}

// Nothing is checkpointed: the arguments die with the forward, and the plan is the
// plain graph's.
TEST(KeptByArguments, NothingKeptWithoutCheckpointing) {
  const Timeline kept = Simulate(1, {false, false}), plain = Simulate(-1, {false, false});
  ASSERT_EQ(kept.events.size(), plain.events.size());
  EXPECT_EQ(ActivationsAtBackwardStart(kept), ActivationsAtBackwardStart(plain));
}

}  // namespace
}  // namespace headroom
