#include "runtime/fused_dropout.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "runtime/dropout_kernel.h"

namespace headroom {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x * scale where the element is kept, 0 where it is dropped. fp32 on the CPU (contiguous)
// is one vectorized pass; anything else scales, then fills in place (a bool operand of
// mul would be cast to a float temporary). Either way only the output is allocated.
at::Tensor ScaleUnlessDropped(const at::Tensor& x, const at::Tensor& dropped, double scale) {
  if (!x.device().is_cpu() || x.scalar_type() != at::kFloat || !x.is_contiguous() ||
      !dropped.is_contiguous()) {
    at::Tensor out = x.mul(scale);
    out.masked_fill_(dropped, 0);
    return out;
  }
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  const float* in = x.const_data_ptr<float>();
  const bool* d = dropped.const_data_ptr<bool>();
  float* o = out.mutable_data_ptr<float>();
  at::parallel_for(0, x.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
    ScaleUnlessDroppedF32(o + begin, in + begin, d + begin, static_cast<float>(scale),
                          end - begin);
  });
  return out;
}

// The mask marks the dropped elements; both passes are one scaled copy.
struct DropoutFunction : torch::autograd::Function<DropoutFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p) {
    const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    const at::Tensor dropped = at::empty(x.sizes(), x.options().dtype(at::kBool)).bernoulli_(p);
    ctx->save_for_backward({dropped});
    ctx->saved_data["scale"] = scale;
    return ScaleUnlessDropped(x, dropped, scale);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor dropped = ctx->get_saved_variables()[0];
    return {ScaleUnlessDropped(grad_outputs[0], dropped, ctx->saved_data["scale"].toDouble()),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor FusedDropout(const at::Tensor& x, double p) { return DropoutFunction::apply(x, p); }

}  // namespace headroom
