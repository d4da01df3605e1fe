// fp32 master weights for the mixed-* regimes (Megatron / DeepSpeed style): the model
// trains in 16-bit, the optimizer updates an fp32 copy of each trainable weight, and the
// 16-bit weight is refreshed from it. One parameter at a time, as the planner models it:
// the 16-bit gradient is copied to fp32 (and unscaled there, so fp16 gradients are
// never divided in 16 bits), that parameter's update runs, and the copy is dropped
// before the next parameter's.
#pragma once

#include <vector>

#include <ATen/Tensor.h>
#include <torch/optim/optimizer.h>

namespace headroom {

class MasterWeights {
 public:
  // `params`: the trainable 16-bit weights, in the order the optimizer was given masters().
  explicit MasterWeights(std::vector<at::Tensor> params);

  // The fp32 copies, for the optimizer to update.
  const std::vector<at::Tensor>& masters() const { return masters_; }
  // Copies the 16-bit weights into the masters (after loading pretrained weights).
  void SyncFromModel();
  // Steps `optimizer` (built over masters()) with the 16-bit gradients times
  // `grad_factor`, one parameter at a time, and writes the results back in 16 bits.
  void Step(torch::optim::Optimizer& optimizer, double grad_factor);

 private:
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> masters_;
};

}  // namespace headroom
