#include "runtime/loss_scaler.h"

#include <ATen/ATen.h>

namespace headroom {

bool DynamicLossScaler::UnscaleAndUpdate(const std::vector<at::Tensor>& params) {
  bool finite = true;
  for (const at::Tensor& p : params) {
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(1.0 / scale_);
    finite = finite && g.isfinite().all().item<bool>();
  }
  if (!finite) {
    scale_ *= options_.backoff_factor;
    clean_steps_ = 0;
    ++skipped_;
  } else if (++clean_steps_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    clean_steps_ = 0;
  }
  return finite;
}

}  // namespace headroom
