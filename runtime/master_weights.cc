#include "runtime/master_weights.h"

#include <torch/torch.h>

namespace headroom {

MasterWeights::MasterWeights(std::vector<at::Tensor> params) : params_(std::move(params)) {
  torch::NoGradGuard no_grad;
  for (const at::Tensor& p : params_)
    masters_.push_back(p.detach().to(at::kFloat, false, /*copy=*/true));
}

void MasterWeights::SyncFromModel() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) masters_[i].copy_(params_[i]);
}

void MasterWeights::Step(torch::optim::Optimizer& optimizer, double grad_factor) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& grad = params_[i].grad();
    if (!grad.defined()) continue;
    at::Tensor& master_grad = masters_[i].mutable_grad();
    master_grad = grad.to(at::kFloat, false, /*copy=*/true);
    if (grad_factor != 1.0) master_grad.mul_(grad_factor);
    // Only this master has a gradient, so the optimizer updates it alone (its per-
    // parameter state, step count included, is untouched for the others).
    optimizer.step();
    master_grad.reset();
    params_[i].detach().copy_(masters_[i]);
  }
}

}  // namespace headroom
