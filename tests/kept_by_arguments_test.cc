// What a Python object among the checkpointed blocks' arguments keeps alive
// (BlockSegment::kept_by_arguments, planner/simulate/internal/kept_by_arguments.h), on a
// graph small enough to follow by hand.
#include <gtest/gtest.h>

#include "planner/simulate/live_bytes.h"
#include "planner/simulate/step_simulator.h"
#include "tests/timeline_probe.h"

namespace headroom {
namespace {

constexpr int64_t kBlockWidth = 8;
constexpr int64_t kBlockMicroBatch = 2, kBlockSeqLen = 4;
constexpr int64_t kBlockActivation =
    kBlockMicroBatch * kBlockSeqLen * kBlockWidth * 4;  // one fp32 activation

// ids -> embedding -> two blocks of three linears (a = x W0, k = a W1, y = k W2) ->
// linear to 16 classes -> log_softmax -> nll. `keeper`: the block that writes its `k`
// into its arguments (-1: none).
OpGraph KeeperGraph(int keeper) {
  OpGraph g;
  const SymShape tokens{Dim::B(), Dim::S()};
  const SymShape hidden{Dim::B(), Dim::S(), Dim::C(kBlockWidth)};
  const TensorId ids = g.AddInput("ids", tokens, DType::kI64);
  const TensorId labels = g.AddInput("labels", tokens, DType::kI64);
  const TensorId table = g.AddParameter("E", {Dim::C(16), Dim::C(kBlockWidth)}, {});
  TensorId x = g.AddOp({.kind = OpKind::kEmbedding, .name = "embed", .inputs = {ids, table}},
                       {{.name = "e", .shape = hidden}})[0];
  const auto linear = [&](const std::string& name, TensorId in) {
    const TensorId w =
        g.AddParameter(name + ".weight", {Dim::C(kBlockWidth), Dim::C(kBlockWidth)}, {});
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
  const TensorId w = g.AddParameter("head", {Dim::C(16), Dim::C(kBlockWidth)}, {});
  const TensorId y = g.AddOp({.kind = OpKind::kLinear, .name = "head", .inputs = {x, w}},
                             {{.name = "logits", .shape = logits_shape}})[0];
  const TensorId lp = g.AddOp({.kind = OpKind::kLogSoftmax, .name = "log_softmax", .inputs = {y}},
                              {{.name = "lp", .shape = logits_shape}})[0];
  g.SetLoss(g.AddOp({.kind = OpKind::kNllLoss, .name = "nll", .inputs = {lp, labels}},
                    {{.name = "loss", .shape = {}}})[0]);
  g.CheckWellFormed();
  return g;
}

TrainingConfig KeeperConfig() {
  TrainingConfig config;
  config.micro_batch = kBlockMicroBatch;
  config.seq_len = kBlockSeqLen;
  config.precision = Precision::kFp32;
  config.stack = Stack::kPytorch;  // torch.utils.checkpoint without reentrant
  return config;
}

Timeline SimulateKeeper(int keeper, std::vector<bool> checkpointed) {
  return SimulateSteps(KeeperGraph(keeper), KeeperConfig(), checkpointed, {.steps = 1});
}

int64_t KeptActivationsAtBackwardStart(const Timeline& t) {
  return BreakdownAtBackwardStart(t)[static_cast<int>(Category::kActivations)];
}

// The live bytes just before the first event of `block`'s recomputation.
int64_t LiveBeforeRecomputeOf(const Timeline& t, int block) {
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
  EXPECT_EQ(KeptActivationsAtBackwardStart(SimulateKeeper(0, {true, true})) -
                KeptActivationsAtBackwardStart(SimulateKeeper(-1, {true, true})),
            kBlockActivation);
}

// Block 1's recomputed `k` keeps its autograd graph, with what the ops upstream of it
// saved (its input x for `a`, `a` for `k`), until the arguments go after block 0's
// backward: three activations more when block 0 recomputes. Block 1's first `k` is gone
// by then (replaced), as the plain graph's is.
TEST(KeptByArguments, TheRecomputedWriteKeepsItsGraphUntilTheFirstCheckpointedBlock) {
  EXPECT_EQ(LiveBeforeRecomputeOf(SimulateKeeper(1, {true, true}), 0) -
                LiveBeforeRecomputeOf(SimulateKeeper(-1, {true, true}), 0),
            3 * kBlockActivation);
}

// Nothing is checkpointed: the arguments die with the forward, and the plan is the
// plain graph's.
TEST(KeptByArguments, NothingKeptWithoutCheckpointing) {
  const Timeline kept = SimulateKeeper(1, {false, false}),
                 plain = SimulateKeeper(-1, {false, false});
  ASSERT_EQ(kept.events.size(), plain.events.size());
  EXPECT_EQ(KeptActivationsAtBackwardStart(kept), KeptActivationsAtBackwardStart(plain));
}

}  // namespace
}  // namespace headroom
