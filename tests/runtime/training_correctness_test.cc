// The runtime trains correctly: checkpointing does not change gradients, accumulation
// gives the update of the whole batch, the loss falls on a learnable task, LoRA leaves
// the base weights alone.
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/catalog.h"
#include "runtime/trainer.h"

namespace headroom {
namespace {

TrainingConfig SmallConfig() {
  TrainingConfig c;
  c.micro_batch = 2;
  c.grad_accum_steps = 1;
  c.seq_len = 32;
  c.precision = Precision::kFp32;
  c.optimizer = OptimizerKind::kSgd;
  c.attention = AttentionImpl::kEager;
  return c;
}

std::map<std::string, at::Tensor> Snapshot(const Trainer& t, bool grads) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, p] : t.NamedParameters()) {
    if (grads && !p.grad().defined()) continue;
    out[name] = (grads ? p.grad() : p).detach().clone();
  }
  return out;
}

TEST(TrainingCorrectness, CheckpointingLeavesGradientsIdentical) {
  // tiny-gpt2 has dropout: the recomputation must replay the same masks.
  const ModelSpec spec = *LoadCatalogModel("tiny-gpt2");
  Trainer plain(spec, SmallConfig(), {false, false}, {.seed = 3});
  const double plain_loss = plain.ForwardBackward();
  Trainer checkpointed(spec, SmallConfig(), {true, true}, {.seed = 3});
  const double checkpointed_loss = checkpointed.ForwardBackward();
  // The forward passes draw the same masks (a checkpointed block runs without grad).
  EXPECT_NEAR(checkpointed_loss, plain_loss, 1e-6 * plain_loss);
  const auto a = Snapshot(plain, true), b = Snapshot(checkpointed, true);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 10u);
  // Within rounding, not bitwise: one CI machine (never this one) gave gradients that
  // differed in every tensor. Rounding differences are about 2e-7 of a tensor's largest
  // entry (the layer norms' sums over 1 and 2 threads); masks replayed from the wrong
  // RNG state move every tensor by 0.4 to 0.9 of it. 1e-5 tells the two apart.
  for (const auto& [name, g] : a) {
    const double scale = g.abs().max().item<double>();
    const double diff = (g - b.at(name)).abs().max().item<double>();
    EXPECT_LE(diff, 1e-5 * scale) << name << ": largest entry " << scale;
  }
}

TEST(TrainingCorrectness, AccumulationMatchesOneLargeBatch) {
  const ModelSpec spec = *LoadCatalogModel("tiny-llama");  // no dropout
  TrainingConfig four_of_two = SmallConfig();
  four_of_two.grad_accum_steps = 4;
  TrainingConfig one_of_eight = SmallConfig();
  one_of_eight.micro_batch = 8;
  Trainer a(spec, four_of_two, {false, false}, {.seed = 5, .learning_rate = 0.1});
  Trainer b(spec, one_of_eight, {false, false}, {.seed = 5, .learning_rate = 0.1});
  const auto before = Snapshot(a, false);
  a.Step();
  b.Step();
  const auto pa = Snapshot(a, false), pb = Snapshot(b, false);
  double largest_update = 0;
  for (const auto& [name, p] : pa) {
    EXPECT_TRUE(torch::allclose(p, pb.at(name), 1e-5, 1e-6)) << name;
    largest_update = std::max(largest_update, (p - before.at(name)).abs().max().item<double>());
  }
  EXPECT_GT(largest_update, 1e-4);  // the step did move the weights
}

TEST(TrainingCorrectness, LossFallsOnALearnableTask) {
  TrainingConfig c = SmallConfig();
  c.micro_batch = 8;
  c.optimizer = OptimizerKind::kAdamW;
  Trainer t(*LoadCatalogModel("tiny-llama"), c, {false, false}, {.seed = 1, .learning_rate = 1e-2});
  const double first = t.Step().loss;
  double last = first;
  for (int i = 0; i < 40; ++i) last = t.Step().loss;
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

TEST(TrainingCorrectness, LoraLeavesBaseWeightsUnchanged) {
  TrainingConfig c = SmallConfig();
  c.optimizer = OptimizerKind::kAdamW;
  c.fine_tune = {.mode = FineTuneMode::kLora, .lora_rank = 4};
  Trainer t(*LoadCatalogModel("tiny-llama"), c, {false, true}, {.seed = 2, .learning_rate = 1e-2});
  const auto before = Snapshot(t, false);
  for (int i = 0; i < 3; ++i) t.Step();
  int adapters_changed = 0;
  for (const auto& [name, p] : Snapshot(t, false)) {
    if (name.find("lora_") != std::string::npos) {
      adapters_changed += torch::equal(p, before.at(name)) ? 0 : 1;
    } else {
      EXPECT_TRUE(torch::equal(p, before.at(name))) << name;
    }
  }
  EXPECT_EQ(adapters_changed, 8);  // A and B on q and v of both layers
}

}  // namespace
}  // namespace headroom
