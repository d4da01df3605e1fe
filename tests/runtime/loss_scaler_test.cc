#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/loss_scaler.h"

namespace headroom {
namespace {

at::Tensor ParamWithGrad(float grad_value) {
  at::Tensor p = torch::zeros({4}, torch::requires_grad());
  p.mutable_grad() = torch::full({4}, grad_value);
  return p;
}

TEST(LossScaler, BacksOffOnInfAndSkips) {
  DynamicLossScaler scaler;
  EXPECT_EQ(scaler.scale(), 65536.0);
  const at::Tensor p = ParamWithGrad(std::numeric_limits<float>::infinity());
  EXPECT_FALSE(scaler.UnscaleAndUpdate({p}));
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

TEST(LossScaler, UnscalesAndGrowsAfterTheInterval) {
  DynamicLossScaler scaler({.init_scale = 8.0, .growth_interval = 3});
  for (int i = 0; i < 2; ++i) {
    const at::Tensor p = ParamWithGrad(8.0f);
    EXPECT_TRUE(scaler.UnscaleAndUpdate({p}));
    EXPECT_FLOAT_EQ(p.grad()[0].item<float>(), 1.0f);  // divided by the scale
    EXPECT_EQ(scaler.scale(), 8.0);
  }
  EXPECT_TRUE(scaler.UnscaleAndUpdate({ParamWithGrad(8.0f)}));
  EXPECT_EQ(scaler.scale(), 16.0);  // third clean step in a row
  EXPECT_FALSE(scaler.UnscaleAndUpdate({ParamWithGrad(std::nanf(""))}));
  EXPECT_EQ(scaler.scale(), 8.0);
}

}  // namespace
}  // namespace headroom
