// Dropout with the memory behaviour of CUDA's fused kernel on every device: it keeps a
// bool mask for backward and allocates only its output (backward: only the input's
// gradient). LibTorch's CPU dropout instead keeps a float mask, and its
// native_dropout_backward computes grad * mask * scale through a temporary.
#pragma once

#include <ATen/Tensor.h>

namespace headroom {

at::Tensor FusedDropout(const at::Tensor& x, double p);

}  // namespace headroom
