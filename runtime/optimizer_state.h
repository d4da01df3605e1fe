// The per-parameter state of LibTorch's AdamW and SGD as named tensors, for the training
// state file: "optim/<i>/step", "optim/<i>/exp_avg" and "optim/<i>/exp_avg_sq" (AdamW),
// "optim/<i>/momentum_buffer" (SGD with momentum), where i counts the optimizer's
// parameters in order. (LibTorch's own archive is a pickle its reader trusts; the state
// file is safetensors so that its header is checked before any byte is used.)
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>

namespace headroom {

std::vector<std::pair<std::string, at::Tensor>> ExportOptimizerState(
    torch::optim::Optimizer& optimizer);

// The saved tensor of a name, if the file has it, checked to have the shape and dtype of
// the second argument (it throws otherwise).
using ReadSaved =
    std::function<std::optional<at::Tensor>(const std::string& name, const at::Tensor& like)>;

// A parameter without saved state starts fresh (none is saved before the first step);
// a parameter with part of its AdamW state throws std::runtime_error naming `origin`.
void ImportOptimizerState(torch::optim::Optimizer& optimizer, const ReadSaved& read,
                          const std::string& origin);

}  // namespace headroom
