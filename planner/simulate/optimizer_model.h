// Optimizer memory per trainable parameter: the states allocated lazily at the first
// step() and the temporaries one step allocates while updating that parameter.
#pragma once

#include "planner/simulate/layer.h"

#include <cstdint>
#include <vector>

#include "planner/core/dtype.h"
#include "planner/core/training_config.h"
#include "planner/graph/sym_shape.h"

namespace headroom {

struct OptimizerParamCost {
  std::vector<int64_t> state_bytes;  // one entry per state tensor (exp_avg, exp_avg_sq, ...)
  int64_t step_temp_bytes = 0;       // peak transient while this parameter is updated
  // foreach: this parameter's share of the temporaries one _foreach_* call makes for the
  // whole group at once (AdamW: sqrt(exp_avg_sq) of every parameter).
  int64_t group_temp_bytes = 0;
  // torch.optim keeps `step` as a 0-d fp32 tensor per parameter (LibTorch as an int).
  int64_t step_tensor_bytes = 0;
};

// `shape` is the parameter's (static) shape; `state_dtype` comes from the precision
// regime; `master_weights` adds the fp32 copy of a 16-bit gradient during the update;
// `step_tensor_on_device`: torch.optim's per-parameter 0-d step tensor is in this device's
// memory (CostTarget::StepTensorOnDevice; LibTorch's optimizers keep none).
OptimizerParamCost CostOptimizer(OptimizerKind kind, OptimizerImpl impl, const SymShape& shape,
                                 DType state_dtype, bool master_weights,
                                 bool step_tensor_on_device);

}  // namespace headroom
