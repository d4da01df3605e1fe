#include "runtime/fused_dropout.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "runtime/dropout_kernel.h"

namespace headroom {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x * scale where the element is kept, 0 where it is dropped: one pass over contiguous
// CPU tensors. Otherwise: scale, then fill in place (a bool operand of mul would be cast
// to a float temporary). Either way only the output is allocated.
at::Tensor ScaleUnlessDropped(const at::Tensor& x, const at::Tensor& dropped, double scale) {
  if (!x.device().is_cpu() || !x.is_contiguous() || !dropped.is_contiguous()) {
    at::Tensor out = x.mul(scale);
    out.masked_fill_(dropped, 0);
    return out;
  }
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  if (x.scalar_type() == at::kFloat) {
    const float* in = x.const_data_ptr<float>();
    const bool* d = dropped.const_data_ptr<bool>();
    float* o = out.mutable_data_ptr<float>();
    at::parallel_for(0, x.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
      ScaleUnlessDroppedF32(o + begin, in + begin, d + begin, static_cast<float>(scale),
                            end - begin);
    });
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "dropout", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const auto s = static_cast<opmath_t>(scale);
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    const bool* d = dropped.const_data_ptr<bool>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, x.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        o[i] = d[i] ? scalar_t(0) : static_cast<scalar_t>(static_cast<opmath_t>(in[i]) * s);
    });
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
