#include "runtime/optimizer_state.h"

#include <stdexcept>

#include <torch/torch.h>

namespace headroom {
namespace {

template <typename Visit>
void ForEachParameter(torch::optim::Optimizer& optimizer, Visit visit) {
  int index = 0;
  for (torch::optim::OptimizerParamGroup& group : optimizer.param_groups())
    for (at::Tensor& p : group.params()) visit(index++, p);
}

// The saved tensor, on the parameter's device and of the parameter's shape.
at::Tensor Restored(const at::Tensor& saved, const at::Tensor& param, const std::string& name) {
  if (saved.sizes() != param.sizes() || saved.scalar_type() != param.scalar_type())
    throw std::runtime_error("the optimizer state " + name + " is " +
                             c10::str(saved.scalar_type(), saved.sizes()) + ", its parameter " +
                             c10::str(param.scalar_type(), param.sizes()));
  return saved.to(param.device());
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> ExportOptimizerState(
    torch::optim::Optimizer& optimizer) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  ForEachParameter(optimizer, [&](int i, const at::Tensor& p) {
    const auto it = optimizer.state().find(p.unsafeGetTensorImpl());
    if (it == optimizer.state().end()) return;
    const std::string prefix = "optim/" + std::to_string(i) + "/";
    if (auto* adam = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) {
      out.emplace_back(prefix + "step", torch::tensor({adam->step()}, torch::kLong));
      out.emplace_back(prefix + "exp_avg", adam->exp_avg());
      out.emplace_back(prefix + "exp_avg_sq", adam->exp_avg_sq());
    } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
      if (sgd->momentum_buffer().defined())
        out.emplace_back(prefix + "momentum_buffer", sgd->momentum_buffer());
    } else {
      throw std::logic_error("ExportOptimizerState: an optimizer train does not run");
    }
  });
  return out;
}

void ImportOptimizerState(
    torch::optim::Optimizer& optimizer,
    const std::function<std::optional<at::Tensor>(const std::string&)>& read) {
  const bool adam = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  ForEachParameter(optimizer, [&](int i, const at::Tensor& p) {
    const std::string prefix = "optim/" + std::to_string(i) + "/";
    if (adam) {
      std::optional<at::Tensor> step = read(prefix + "step"), exp_avg = read(prefix + "exp_avg"),
                                exp_avg_sq = read(prefix + "exp_avg_sq");
      if (!step && !exp_avg && !exp_avg_sq) return;
      if (!step || !exp_avg || !exp_avg_sq || step->numel() != 1)
        throw std::runtime_error("incomplete AdamW state for parameter " + std::to_string(i));
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(step->to(torch::kLong).item<int64_t>());
      state->exp_avg(Restored(*exp_avg, p, prefix + "exp_avg"));
      state->exp_avg_sq(Restored(*exp_avg_sq, p, prefix + "exp_avg_sq"));
      optimizer.state()[p.unsafeGetTensorImpl()] = std::move(state);
    } else if (std::optional<at::Tensor> buffer = read(prefix + "momentum_buffer")) {
      auto state = std::make_unique<torch::optim::SGDParamState>();
      state->momentum_buffer(Restored(*buffer, p, prefix + "momentum_buffer"));
      optimizer.state()[p.unsafeGetTensorImpl()] = std::move(state);
    }
  });
}

}  // namespace headroom
