// Invariants every simulation must satisfy, over a sweep of configurations on the tiny
// models of all three families: every buffer freed with the size it was allocated with,
// only persistent bytes left after each step, the peak at least the persistent bytes,
// and the categories at the peak summing to the peak.
#include <map>

#include <gtest/gtest.h>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/simulate/live_bytes.h"
#include "planner/simulate/step_prediction.h"
#include "planner/simulate/step_simulator.h"

namespace headroom {
namespace {

struct SweepCase {
  std::string model;
  Precision precision;
  FineTuneMode mode;
  std::string checkpoint;
  AttentionImpl attention;
  OptimizerKind optimizer;
  int64_t micro_batch;
  int64_t grad_accum;
};

std::vector<SweepCase> Sweep() {
  std::vector<SweepCase> cases;
  const OptimizerKind optimizers[] = {OptimizerKind::kAdamW, OptimizerKind::kSgdMomentum,
                                      OptimizerKind::kAdafactor, OptimizerKind::kAdamW8bit,
                                      OptimizerKind::kSgd};
  int i = 0;
  for (const char* model : {"tiny-gpt2", "tiny-llama", "tiny-bert"}) {
    for (Precision p : {Precision::kFp32, Precision::kAmpBf16, Precision::kAmpFp16,
                        Precision::kBf16, Precision::kMixedBf16, Precision::kMixedFp16}) {
      for (FineTuneMode mode : {FineTuneMode::kFull, FineTuneMode::kLora, FineTuneMode::kQLora}) {
        if (mode == FineTuneMode::kQLora && p == Precision::kFp32) continue;
        for (const char* ckpt : {"none", "all", "every:2"}) {
          for (AttentionImpl attn : {AttentionImpl::kEager, AttentionImpl::kSdpa}) {
            ++i;
            cases.push_back({model, p, mode, ckpt, attn, optimizers[i % 5], 1 + i % 3, 1 + i % 2});
          }
        }
      }
    }
  }
  return cases;
}

TEST(SimulatorInvariants, HoldForEveryConfiguration) {
  const std::vector<SweepCase> cases = Sweep();
  ASSERT_EQ(cases.size(), 3u * 17 * 3 * 2);  // models x (precision, mode) x checkpoint x attention
  for (const SweepCase& c : cases) {
    SCOPED_TRACE(c.model + " " + std::string(PrecisionName(c.precision)) + " mode " +
                 std::to_string(static_cast<int>(c.mode)) + " ckpt " + c.checkpoint);
    const ModelSpec spec = *LoadCatalogModel(c.model);
    TrainingConfig config;
    config.precision = c.precision;
    config.optimizer = c.optimizer;
    config.micro_batch = c.micro_batch;
    config.grad_accum_steps = c.grad_accum;
    config.seq_len = 32;
    config.attention = c.attention;
    config.fine_tune.mode = c.mode;
    config.fine_tune.lora_rank = 4;
    config.fine_tune.lora_dropout = 0.05;
    auto graph =
        BuildGraph(spec, {.fine_tune = config.fine_tune, .attention_call = {.impl = c.attention}});
    ASSERT_TRUE(graph.ok()) << graph.error().message;
    const auto ckpt =
        *CheckpointPolicy::Parse(c.checkpoint)->Resolve(static_cast<int>(graph->blocks().size()));

    // The simulator itself throws if anything but persistent bytes survives a step.
    Timeline t;
    ASSERT_NO_THROW(t = SimulateSteps(*graph, config, ckpt, {.cublas_workspace_bytes = 4096}));

    std::map<int64_t, int64_t> open;
    for (const MemoryEvent& e : t.events) {
      if (e.kind == MemoryEvent::Kind::kAlloc) {
        ASSERT_TRUE(open.emplace(e.buffer, e.bytes).second);
      } else {
        ASSERT_EQ(open.at(e.buffer), e.bytes);
        open.erase(e.buffer);
      }
    }
    LiveBytes live(t);
    Replay(t, live);
    const CategoryBytes& end = live.current_breakdown();
    EXPECT_EQ(end[static_cast<int>(Category::kActivations)], 0);
    EXPECT_EQ(end[static_cast<int>(Category::kGradients)], 0);
    EXPECT_EQ(end[static_cast<int>(Category::kWeightCasts)], 0);
    EXPECT_EQ(end[static_cast<int>(Category::kTemporaries)], 4096);  // the cuBLAS workspace only
    EXPECT_GE(live.live().peak, live.live().current);
    int64_t sum = 0;
    for (int64_t b : live.breakdown_at_peak()) sum += b;
    EXPECT_EQ(sum, live.live().peak);
  }
}

// More sequences per micro-batch never need less memory (activations scale with b);
// the peak may stay put while it is the optimizer step's, but b = 8 needs more than b = 1.
TEST(SimulatorInvariants, PeakGrowsWithMicroBatch) {
  for (const char* model : {"tiny-gpt2", "tiny-llama", "tiny-bert"}) {
    const OpGraph graph = *BuildGraph(*LoadCatalogModel(model), {});
    const std::vector<bool> ckpt(graph.blocks().size(), false);
    int64_t previous = 0, first = 0;
    for (int64_t b : {1, 2, 4, 8}) {
      TrainingConfig config;
      config.micro_batch = b;
      config.seq_len = 64;
      const StepPrediction p = PredictStep(graph, config, ckpt, CpuDevice(int64_t{1} << 40));
      EXPECT_GE(p.allocated_peak_bytes, previous) << model << " b=" << b;
      if (b == 1) first = p.allocated_peak_bytes;
      previous = p.allocated_peak_bytes;
    }
    EXPECT_GT(previous, first) << model;
  }
}

}  // namespace
}  // namespace headroom
