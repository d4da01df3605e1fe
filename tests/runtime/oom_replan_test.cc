// An out-of-memory inside a step is caught: the trainer re-plans for the memory it had
// and redoes the same effective batch, so the run ends with the same updates as one
// planned that way from the start.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/catalog.h"
#include "runtime/trainer.h"

namespace headroom {
namespace {

TEST(OomReplan, RecoversWithTheSameUpdates) {
  // tiny-llama has no dropout, so the redone step is exactly reproducible.
  const ModelSpec spec = *LoadCatalogModel("tiny-llama");
  TrainingConfig c;
  c.micro_batch = 8;
  c.grad_accum_steps = 1;
  c.seq_len = 64;
  c.precision = Precision::kFp32;
  c.optimizer = OptimizerKind::kAdamW;
  Trainer probe(spec, c, {false, false}, {.seed = 3});
  const int64_t budget = probe.predicted_peak_allocated_bytes() * 7 / 10;

  std::vector<std::string> messages;
  Trainer constrained(spec, c, {false, false}, {.seed = 3, .budget_bytes = budget});
  constrained.set_replan_listener([&](const std::string& m) { messages.push_back(m); });
  int retries = 0;
  for (int i = 0; i < 3; ++i) retries += constrained.Step().oom_retries;
  EXPECT_GE(retries, 1);
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages[0].find("redoing step 1"), std::string::npos) << messages[0];
  EXPECT_EQ(constrained.steps_done(), 3);
  const TrainingConfig& replanned = constrained.config();
  EXPECT_EQ(replanned.micro_batch * replanned.grad_accum_steps, 8);  // effective batch kept
  EXPECT_LE(constrained.measured_peak_allocated_bytes(), budget);

  // The same plan from the start, without a budget: identical weights after 3 steps.
  Trainer planned(spec, replanned, constrained.checkpointed(), {.seed = 3});
  for (int i = 0; i < 3; ++i) planned.Step();
  const auto a = constrained.NamedParameters(), b = planned.NamedParameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
}

}  // namespace
}  // namespace headroom
