#include "runtime/fused_dropout.h"

#include <torch/torch.h>

namespace headroom {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The mask marks the dropped elements, so that both passes are one scaled copy and an
// in-place masked_fill_ (a bool operand of mul would be cast to a float temporary).
struct DropoutFunction : torch::autograd::Function<DropoutFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p) {
    const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    const at::Tensor dropped = at::empty(x.sizes(), x.options().dtype(at::kBool)).bernoulli_(p);
    at::Tensor out = x.mul(scale);
    out.masked_fill_(dropped, 0);
    ctx->save_for_backward({dropped});
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor dropped = ctx->get_saved_variables()[0];
    at::Tensor grad = grad_outputs[0].mul(ctx->saved_data["scale"].toDouble());
    grad.masked_fill_(dropped, 0);
    return {grad, at::Tensor()};
  }
};

}  // namespace

at::Tensor FusedDropout(const at::Tensor& x, double p) { return DropoutFunction::apply(x, p); }

}  // namespace headroom
