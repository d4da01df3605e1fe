// fp32 master weights (mixed-bf16 / mixed-fp16): updates too small for the 16-bit
// weight accumulate in the master; fp16 gradients are unscaled in fp32, where values
// that would flush to zero in fp16 survive; a whole mixed-precision run trains.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/catalog.h"
#include "runtime/master_weights.h"
#include "runtime/trainer.h"

namespace headroom {
namespace {

at::Tensor SixteenBitParam(at::ScalarType type, float value) {
  return torch::full({8}, value, torch::TensorOptions().dtype(type)).requires_grad_(true);
}

TEST(MasterWeights, SmallUpdatesAccumulateInTheMaster) {
  at::Tensor p = SixteenBitParam(at::kBFloat16, 1.0f);
  MasterWeights masters({p});
  torch::optim::SGD sgd(masters.masters(), torch::optim::SGDOptions(1.0));
  for (int step = 0; step < 100; ++step) {
    p.mutable_grad() = torch::full({8}, 1e-4f, torch::TensorOptions().dtype(at::kBFloat16));
    masters.Step(sgd, 1.0);
    p.mutable_grad().reset();
  }
  // bf16 spacing below 1 is 2^-8: one step of 1e-4 alone would round back to 1.
  // (1e-4 itself is bf16-rounded to 1.00016e-4 before the step.)
  const float grad = at::scalar_tensor(1e-4f).to(at::kBFloat16).item<float>();
  EXPECT_NEAR(masters.masters()[0][0].item<float>(), 1.0f - 100 * grad, 1e-6);
  EXPECT_TRUE(torch::equal(p, masters.masters()[0].to(at::kBFloat16)));
  EXPECT_LT(p[0].item<float>(), 1.0f);
}

TEST(MasterWeights, Fp16GradientsAreUnscaledInFp32) {
  at::Tensor p = SixteenBitParam(at::kHalf, 0.0f);
  MasterWeights masters({p});
  torch::optim::SGD sgd(masters.masters(), torch::optim::SGDOptions(1.0));
  const double scale = 65536.0;
  // A true gradient of 1e-9, below fp16's smallest subnormal (6e-8), scaled into range.
  p.mutable_grad() = torch::full({8}, 1e-9 * scale, torch::TensorOptions().dtype(at::kHalf));
  masters.Step(sgd, 1.0 / scale);
  EXPECT_NEAR(masters.masters()[0][0].item<float>(), -1e-9, 1e-12);
}

TEST(MasterWeights, MixedBf16RunLearnsTheSyntheticTask) {
  const ModelSpec spec = *LoadCatalogModel("tiny-llama");
  TrainingConfig config;
  config.micro_batch = 8;
  config.seq_len = 32;
  config.precision = Precision::kMixedBf16;
  config.optimizer = OptimizerKind::kAdamW;
  config.attention = AttentionImpl::kEager;
  Trainer trainer(spec, config, {false, false}, {.seed = 1, .learning_rate = 1e-2});
  const double first = trainer.Step().loss;
  double last = first;
  for (int i = 0; i < 40; ++i) last = trainer.Step().loss;
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
  for (const auto& [name, t] : trainer.NamedParameters())
    EXPECT_EQ(t.scalar_type(), at::kBFloat16) << name;
}

}  // namespace
}  // namespace headroom
