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

void ImportOptimizerState(torch::optim::Optimizer& optimizer, const ReadSaved& read,
                          const std::string& origin) {
  const bool adam = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  ForEachParameter(optimizer, [&](int i, const at::Tensor& p) {
    const std::string prefix = "optim/" + std::to_string(i) + "/";
    if (adam) {
      std::optional<at::Tensor> step = read(prefix + "step", torch::zeros({1}, torch::kLong)),
                                exp_avg = read(prefix + "exp_avg", p),
                                exp_avg_sq = read(prefix + "exp_avg_sq", p);
      if (!step && !exp_avg && !exp_avg_sq) return;
      if (!step || !exp_avg || !exp_avg_sq)
        throw std::runtime_error(origin + ": incomplete AdamW state for parameter " +
                                 std::to_string(i));
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(step->item<int64_t>());
      state->exp_avg(exp_avg->to(p.device()));
      state->exp_avg_sq(exp_avg_sq->to(p.device()));
      optimizer.state()[p.unsafeGetTensorImpl()] = std::move(state);
    } else if (std::optional<at::Tensor> buffer = read(prefix + "momentum_buffer", p)) {
      auto state = std::make_unique<torch::optim::SGDParamState>();
      state->momentum_buffer(buffer->to(p.device()));
      optimizer.state()[p.unsafeGetTensorImpl()] = std::move(state);
    }
  });
}

}  // namespace headroom
