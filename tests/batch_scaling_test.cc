// The simulator keeps sizes at micro-batch 1 and scales the per-sample ones
// (SimulationTables): that is exact only if every cost rule is proportional to the
// micro-batch where it says it is, and constant where it says it is not. Checked here
// for every op of every catalog model, precision, fine-tuning mode and attention kernel.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/simulate/op_cost.h"
#include "planner/simulate/step_simulator.h"

namespace headroom {
namespace {

constexpr int64_t kB = 3;
constexpr int64_t kSeq = 128;
const ShapeEnv kOne{.micro_batch = 1, .seq_len = kSeq};
const ShapeEnv kMany{.micro_batch = kB, .seq_len = kSeq};

int64_t Scaled(int64_t bytes, bool per_sample) { return per_sample ? bytes * kB : bytes; }

// Every failure names the graph and op, so one message says what broke.
void ExpectCostsScale(const OpGraph& g, const TensorStates& states, const std::string& where) {
  for (int t = 0; t < g.num_tensors(); ++t) {
    const TensorId id{t};
    EXPECT_EQ(states.Bytes(g, id, kMany),
              Scaled(states.Bytes(g, id, kOne), g.tensor(id).shape.ScalesWithBatch()))
        << where << ": tensor " << g.tensor(id).name;
  }
  for (int o = 0; o < g.num_ops(); ++o) {
    const OpNode& op = g.op(OpId{o});
    for (bool grad_mode : {false, true}) {
      const ForwardCost one = CostForward(g, op, states, kOne, grad_mode);
      const ForwardCost many = CostForward(g, op, states, kMany, grad_mode);
      // What an op allocates and saves must not depend on the batch, only how much.
      EXPECT_EQ(one.saves_input, many.saves_input) << where << ": " << op.name;
      EXPECT_EQ(one.saves_output(), many.saves_output()) << where << ": " << op.name;
      EXPECT_EQ(one.output_aliases_input, many.output_aliases_input) << where << ": " << op.name;
      ASSERT_EQ(one.internals.size(), many.internals.size()) << where << ": " << op.name;
      for (size_t i = 0; i < one.internals.size(); ++i) {
        EXPECT_EQ(one.internals[i].lifetime, many.internals[i].lifetime)
            << where << ": " << op.name;
        EXPECT_EQ(many.internals[i].bytes,
                  Scaled(one.internals[i].bytes, one.internals[i].per_sample))
            << where << ": " << op.name << " internal " << one.internals[i].label;
      }
      // The simulator takes a forward workspace as per-sample.
      EXPECT_EQ(many.workspace_bytes, kB * one.workspace_bytes) << where << ": " << op.name;
    }
    const BackwardCost one = CostBackward(g, op, states, kOne);
    const BackwardCost many = CostBackward(g, op, states, kMany);
    EXPECT_EQ(one.input_grads, many.input_grads) << where << ": " << op.name << " gradient flow";
    EXPECT_EQ(many.workspace_bytes, Scaled(one.workspace_bytes, one.workspace_per_sample))
        << where << ": " << op.name << " backward workspace";
    EXPECT_EQ(many.input_grad_scratch_bytes, kB * one.input_grad_scratch_bytes)
        << where << ": " << op.name << " input-gradient scratch";
  }
}

TEST(BatchScaling, EveryCostRuleIsProportionalToTheMicroBatchWhereItSaysItIs) {
  int graphs = 0;
  for (const std::string& name : CatalogModelNames()) {
    const ModelSpec spec = *LoadCatalogModel(name);
    for (FineTuneMode mode : {FineTuneMode::kFull, FineTuneMode::kLora, FineTuneMode::kQLora}) {
      for (AttentionImpl attention : {AttentionImpl::kSdpa, AttentionImpl::kEager}) {
        // A sequence past every catalog window: SDPA's sliding layers take the window mask.
        auto graph = BuildGraph(spec, {.fine_tune = {.mode = mode},
                                       .attention_call = {.impl = attention},
                                       .seq_len = 1 << 16});
        if (!graph) continue;  // e.g. QLoRA where the family does not support it
        ++graphs;
        for (Precision p : {Precision::kFp32, Precision::kAmpBf16, Precision::kAmpFp16,
                            Precision::kBf16, Precision::kMixedBf16, Precision::kMixedFp16}) {
          ExpectCostsScale(*graph, TensorStates(*graph, RegimeOf(p)),
                           fmt::format("{} mode {} attention {} {}", name, static_cast<int>(mode),
                                       static_cast<int>(attention), PrecisionName(p)));
          if (HasFailure()) return;
        }
      }
    }
  }
  EXPECT_GE(graphs, 10);
}

// Tables shared through WithBatch simulate exactly what tables built for that batch do.
TEST(BatchScaling, SharedTablesSimulateLikeTablesBuiltForTheBatch) {
  TrainingConfig config;
  config.seq_len = 64;
  config.precision = Precision::kAmpBf16;
  const OpGraph graph = *BuildGraph(*LoadCatalogModel("tiny-llama"), {});
  const SimulationTables shared(graph, config);
  config.micro_batch = 4;
  config.grad_accum_steps = 3;
  std::vector<bool> checkpointed(graph.blocks().size(), false);
  checkpointed[0] = true;
  const Timeline a = SimulateSteps(shared.WithBatch(4, 3), checkpointed);
  const Timeline b = SimulateSteps(SimulationTables(graph, config), checkpointed);
  ASSERT_EQ(a.events.size(), b.events.size());
  int64_t per_sample_bytes = 0;
  for (size_t i = 0; i < a.events.size(); ++i) {
    ASSERT_EQ(a.events[i].bytes, b.events[i].bytes) << "event " << i;
    ASSERT_EQ(a.events[i].kind, b.events[i].kind) << "event " << i;
    if (a.events[i].per_sample && a.events[i].kind == MemoryEvent::Kind::kAlloc)
      per_sample_bytes += a.events[i].bytes;
  }
  // The shared tables are still at micro-batch 1: the first simulation did not change them.
  const Timeline one = SimulateSteps(shared, checkpointed);
  int64_t per_sample_one = 0;
  for (const MemoryEvent& e : one.events) {
    if (e.per_sample && e.kind == MemoryEvent::Kind::kAlloc) per_sample_one += e.bytes;
  }
  // Micro-batches 1 and K of two steps at accumulation 3, one micro-batch per step at 1.
  EXPECT_EQ(per_sample_bytes, 2 * 4 * per_sample_one);
}

}  // namespace
}  // namespace headroom
