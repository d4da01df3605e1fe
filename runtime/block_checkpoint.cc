#include "runtime/block_checkpoint.h"

#include <cstdint>

#include <torch/torch.h>

#include "runtime/graph_executor.h"
#include "runtime/rng_state.h"

namespace headroom {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // `anchor` requires grad so that the output does even when no input does (LoRA: the
  // block input comes from a frozen embedding), as the block's adapters need.
  static at::Tensor forward(AutogradContext* ctx, GraphExecutor* executor, int64_t block,
                            const at::Tensor& anchor, at::TensorList inputs) {
    (void)anchor;
    ctx->saved_data["executor"] = reinterpret_cast<int64_t>(executor);
    ctx->saved_data["block"] = block;
    ctx->saved_data["rng"] = GetRngState(inputs[0].device());
    ctx->save_for_backward(inputs.vec());
    return executor->RunBlock(static_cast<int>(block), inputs.vec());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* executor = reinterpret_cast<GraphExecutor*>(ctx->saved_data["executor"].toInt());
    const int block = static_cast<int>(ctx->saved_data["block"].toInt());
    const variable_list saved = ctx->get_saved_variables();
    variable_list inputs;
    for (const at::Tensor& t : saved) {
      at::Tensor d = t.detach();
      if (t.is_floating_point() && t.requires_grad()) d.requires_grad_(true);
      inputs.push_back(d);
    }
    at::Tensor output;
    {
      // Replay the forward's dropout masks, then leave the RNG where it was.
      const c10::Device device = inputs[0].device();
      const at::Tensor rng_now = GetRngState(device);
      SetRngState(device, ctx->saved_data["rng"].toTensor());
      torch::AutoGradMode grad(true);
      output = executor->RunBlock(block, inputs);
      SetRngState(device, rng_now);
    }
    torch::autograd::backward({output}, {grad_outputs[0]});
    output.reset();
    variable_list grads = {at::Tensor(), at::Tensor(), at::Tensor()};  // executor, block, anchor
    for (const at::Tensor& in : inputs) grads.push_back(in.requires_grad() ? in.grad() : at::Tensor());
    return grads;
  }
};

}  // namespace

at::Tensor CheckpointBlock(GraphExecutor& executor, int block,
                           const std::vector<at::Tensor>& external_inputs) {
  static const at::Tensor anchor = [] {
    at::NoGradGuard no_grad;
    return at::zeros({}, at::TensorOptions().dtype(at::kFloat)).requires_grad_(true);
  }();
  return CheckpointFunction::apply(&executor, static_cast<int64_t>(block), anchor,
                                   at::TensorList(external_inputs));
}

}  // namespace headroom
