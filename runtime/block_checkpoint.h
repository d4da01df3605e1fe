// Activation checkpointing of one block: a custom autograd function whose forward runs
// the block without recording (saving only the block's external inputs) and whose
// backward restores the RNG state of that forward, recomputes the block with grad
// enabled and backpropagates through it — PyTorch's reentrant torch.utils.checkpoint.
#pragma once

#include <vector>

#include <ATen/Tensor.h>

namespace headroom {

class GraphExecutor;

at::Tensor CheckpointBlock(GraphExecutor& executor, int block,
                           const std::vector<at::Tensor>& external_inputs);

}  // namespace headroom
