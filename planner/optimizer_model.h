// Optimizer memory per trainable parameter: the states allocated lazily at the first
// step() and the temporaries one step allocates while updating that parameter.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/dtype.h"
#include "planner/sym_shape.h"
#include "planner/training_config.h"

namespace headroom {

struct OptimizerParamCost {
  std::vector<int64_t> state_bytes;  // one entry per state tensor (exp_avg, exp_avg_sq, ...)
  int64_t step_temp_bytes = 0;       // peak transient while this parameter is updated
};

// `shape` is the parameter's (static) shape; `state_dtype` comes from the precision
// regime; `master_weights` adds the fp32 copy of a 16-bit gradient during the update.
OptimizerParamCost CostOptimizer(OptimizerKind kind, const SymShape& shape, DType state_dtype,
                                 bool master_weights);

}  // namespace headroom
