#include "runtime/loss_scaler.h"

#include <ATen/ATen.h>

namespace headroom {

namespace {

bool AllFinite(const std::vector<at::Tensor>& params, double factor) {
  bool finite = true;
  for (const at::Tensor& p : params) {
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    if (factor != 1.0) g.mul_(factor);
    finite = finite && g.isfinite().all().item<bool>();
  }
  return finite;
}

}  // namespace

bool DynamicLossScaler::UnscaleAndUpdate(const std::vector<at::Tensor>& params) {
  return Update(AllFinite(params, 1.0 / scale_));
}

bool DynamicLossScaler::CheckAndUpdate(const std::vector<at::Tensor>& params) {
  return Update(AllFinite(params, 1.0));
}

bool DynamicLossScaler::Update(bool finite) {
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
