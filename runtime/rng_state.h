// The state of a device's default random generator (dropout masks come from it), to
// replay a checkpointed block's forward exactly and to resume a run bit for bit.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

namespace headroom {

at::Tensor GetRngState(c10::Device device);
void SetRngState(c10::Device device, const at::Tensor& state);

}  // namespace headroom
