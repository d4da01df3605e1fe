// Dynamic loss scaling for fp16 training with PyTorch's GradScaler defaults: start at
// 2^16; a step whose gradients hold inf or NaN is skipped and the scale halves; after
// 2000 clean steps in a row it doubles.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/Tensor.h>

namespace headroom {

struct LossScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerOptions options = {})
      : options_(options), scale_(options.init_scale) {}

  double scale() const { return scale_; }
  // What a resumed run needs to continue exactly: scale, clean-step streak, skips.
  std::vector<double> State() const {
    return {scale_, static_cast<double>(clean_steps_), static_cast<double>(skipped_)};
  }
  void Restore(const std::vector<double>& state) {
    scale_ = state.at(0);
    clean_steps_ = static_cast<int64_t>(state.at(1));
    skipped_ = static_cast<int64_t>(state.at(2));
  }
  int64_t skipped_steps() const { return skipped_; }
  // Divides the gradients by the scale; returns true when all are finite (the step may
  // be taken). Then updates the scale for the next step.
  bool UnscaleAndUpdate(const std::vector<at::Tensor>& params);
  // For gradients unscaled elsewhere (fp16 ones, in their fp32 copies): checks them as
  // they are, then updates the scale; true when the step may be taken.
  bool CheckAndUpdate(const std::vector<at::Tensor>& params);

 private:
  bool Update(bool finite);

  LossScalerOptions options_;
  double scale_;
  int64_t clean_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace headroom
