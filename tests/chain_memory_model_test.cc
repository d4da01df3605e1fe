// The chain profile read off a micro-batch-1 timeline at micro-batch b equals the one
// read off a timeline simulated at b: every event's "scales with the micro-batch" flag
// is right, for every family, precision and fine-tuning mode.
#include <gtest/gtest.h>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/solve/chain_memory_model.h"
#include "planner/simulate/step_simulator.h"

namespace headroom {
namespace {

// The parts read off the timeline (`kept` comes from the block outputs' shapes).
void ExpectSameMeasurements(const ChainProfile& a, const ChainProfile& b) {
  EXPECT_EQ(a.fixed_peak, b.fixed_peak);
  EXPECT_EQ(a.head_peak, b.head_peak);
  EXPECT_EQ(a.block_peak, b.block_peak);
  EXPECT_EQ(a.stored, b.stored);
}

TEST(ChainProfile, MicroBatchOneTimelineGivesTheProfileAtAnyMicroBatch) {
  for (const char* model : {"tiny-gpt2", "tiny-llama", "tiny-bert"}) {
    for (Precision p : {Precision::kFp32, Precision::kAmpBf16, Precision::kBf16}) {
      for (FineTuneMode mode : {FineTuneMode::kFull, FineTuneMode::kLora, FineTuneMode::kQLora}) {
        if (mode == FineTuneMode::kQLora && p == Precision::kFp32) continue;
        SCOPED_TRACE(std::string(model) + " " + std::string(PrecisionName(p)) + " mode " +
                     std::to_string(static_cast<int>(mode)));
        TrainingConfig config;
        config.precision = p;
        config.seq_len = 32;
        config.grad_accum_steps = 2;
        config.fine_tune = {.mode = mode, .lora_rank = 4};
        const OpGraph graph =
            *BuildGraph(*LoadCatalogModel(model), {.fine_tune = config.fine_tune});
        const std::vector<bool> none(graph.blocks().size(), false);
        const TensorStates states(graph, RegimeOf(config.precision));
        const SimulationOptions sim{.steps = 1, .cublas_workspace_bytes = 1 << 20};
        config.micro_batch = 1;
        const Timeline at1 = SimulateSteps(graph, config, none, sim);
        for (int64_t b : {2, 3, 8}) {
          config.micro_batch = b;
          const Timeline direct = SimulateSteps(graph, config, none, sim);
          for (int64_t granularity : {1, 512}) {
            // The direct timeline's sizes are already at b: read it with scale 1.
            ExpectSameMeasurements(
                ProfileChain(graph, states, at1, {b, config.seq_len}, granularity, 1000),
                ProfileChain(graph, states, direct, {1, config.seq_len}, granularity, 1000));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// A checkpointed block's backward holds its output's gradient: free where the block ends
// in a residual add (GPT-2, Llama pass that gradient on), a hidden-state tensor more
// where it ends in BERT's post-LayerNorm.
TEST(ChainProfile, HeldOutputGradientOnlyWhereTheLastOpMakesANewOne) {
  for (const char* model : {"tiny-gpt2", "tiny-llama", "tiny-bert"}) {
    SCOPED_TRACE(model);
    TrainingConfig config;
    config.precision = Precision::kFp32;
    config.seq_len = 32;
    config.micro_batch = 2;
    const OpGraph graph = *BuildGraph(*LoadCatalogModel(model), {});
    const std::vector<bool> none(graph.blocks().size(), false);
    const TensorStates states(graph, RegimeOf(config.precision));
    const ChainProfile p = ProfileChain(graph, states, SimulateSteps(graph, config, none, {}),
                                        {config.micro_batch, config.seq_len}, 1);
    const bool post_norm = std::string(model) == "tiny-bert";
    for (size_t i = 0; i < p.kept.size(); ++i) {
      EXPECT_GT(p.kept[i], 0);
      EXPECT_EQ(p.grad_held[i], post_norm ? p.kept[i] : 0) << "block " << i;
    }
  }
}

}  // namespace
}  // namespace headroom
