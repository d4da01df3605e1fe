// The second interpreter of the OpGraph: runs a micro-batch's forward pass with LibTorch
// ops, so autograd records the backward. Each tensor is released at its last use, as
// the simulator assumes; checkpointed blocks run without saving activations and are
// recomputed in backward (block_checkpoint.h). Mixed precision follows the planner's
// dtype rules (TensorStates::UsedDType) with explicit casts and autocast's weight-cast
// cache, so the executed casts are the predicted ones on every device.
#pragma once

#include <map>
#include <vector>

#include <ATen/Tensor.h>

#include "planner/graph/op_graph.h"
#include "planner/simulate/tensor_states.h"
#include "planner/core/training_config.h"
#include "runtime/op_kernels.h"
#include "runtime/parameter_store.h"

namespace headroom {

class GraphExecutor {
 public:
  // `expert_load`, if given, accumulates the routing the mixture-of-experts layers see.
  GraphExecutor(const OpGraph& graph, const TrainingConfig& config, const ParameterStore& params,
                ExpertLoad* expert_load = nullptr);

  // `inputs` holds a tensor for every input of the graph (by tensor id; others
  // undefined); they are moved in and released at their last use. Returns the loss.
  at::Tensor Forward(std::vector<at::Tensor> inputs, const std::vector<bool>& checkpointed);

  // Runs block `block` from its external inputs (block input first, then the tables
  // it reads) and returns its output; used by the checkpoint function, with grad
  // disabled in its forward and enabled when it recomputes.
  at::Tensor RunBlock(int block, const std::vector<at::Tensor>& external_inputs);

 private:
  // Tensor values of one run (a forward, or one block) with uses left per tensor.
  struct Frame {
    std::vector<at::Tensor> values;
    std::vector<int> uses_left;
    std::map<int, at::Tensor> cast_cache;  // autocast copies of trainable weights
  };

  void RunOp(const OpNode& op, Frame& frame);
  at::Tensor Input(const OpNode& op, size_t i, Frame& frame);
  void UseDone(TensorId t, Frame& frame);

  const OpGraph& graph_;
  TrainingConfig config_;
  const ParameterStore& params_;
  TensorStates states_;
  // Per block: the distinct tensors it reads from outside itself (block input first,
  // then tables), and every such read, one entry per op input, for the use counts.
  std::vector<std::vector<TensorId>> external_inputs_;
  std::vector<std::vector<TensorId>> outside_reads_;
  ExpertLoad* expert_load_;
};

}  // namespace headroom
