#include "planner/simulate/optimizer_model.h"

namespace headroom {

namespace {
// bitsandbytes keeps 32-bit states for parameters smaller than this (min_8bit_size).
constexpr int64_t kMin8bitNumel = 4096;
// bitsandbytes blockwise quantization: one fp32 absmax per 256 values per state.
constexpr int64_t kQuantBlock = 256;
}  // namespace

OptimizerParamCost CostOptimizer(OptimizerKind kind, OptimizerImpl impl, const SymShape& shape,
                                 DType state_dtype, bool master_weights,
                                 bool step_tensor_on_device) {
  const int64_t n = shape.Numel({});
  OptimizerParamCost cost;
  const int64_t state = StorageBytes(state_dtype, n);
  switch (kind) {
    case OptimizerKind::kAdamW:
      cost.state_bytes = {state, state};  // exp_avg, exp_avg_sq
      if (step_tensor_on_device) cost.step_tensor_bytes = StorageBytes(DType::kF32, 1);
      switch (impl) {
        case OptimizerImpl::kForLoop:
          // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps): the sqrt
          // result and the quotient are live together.
          cost.step_temp_bytes = 2 * state;
          break;
        case OptimizerImpl::kForeach:
          // exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), then divided and added
          // to in place: one copy of every parameter's exp_avg_sq at once.
          cost.group_temp_bytes = state;
          break;
        case OptimizerImpl::kFused:
          break;  // _fused_adamw_ updates in one kernel
      }
      break;
    case OptimizerKind::kSgd:
      break;
    case OptimizerKind::kSgdMomentum:
      cost.state_bytes = {state};  // momentum_buffer = grad.clone() at the first step
      break;
    case OptimizerKind::kAdafactor: {
      const auto& dims = shape.dims();
      if (dims.size() >= 2) {
        const int64_t rows = n / dims.back().value, cols = dims.back().value;
        cost.state_bytes = {StorageBytes(DType::kF32, rows), StorageBytes(DType::kF32, cols)};
      } else {
        cost.state_bytes = {StorageBytes(DType::kF32, n)};
      }
      // update = grad**2 + eps, then the approximated rsqrt factor times grad.
      cost.step_temp_bytes = 2 * StorageBytes(DType::kF32, n);
      break;
    }
    case OptimizerKind::kAdamW8bit:
      if (n >= kMin8bitNumel) {
        const int64_t absmax = StorageBytes(DType::kF32, (n + kQuantBlock - 1) / kQuantBlock);
        cost.state_bytes = {n + absmax, n + absmax};
      } else {
        cost.state_bytes = {4 * n, 4 * n};
      }
      break;  // fused kernel: no temporaries
  }
  if (master_weights)
    cost.step_temp_bytes += StorageBytes(DType::kF32, n);  // fp32 copy of the 16-bit grad
  return cost;
}

}  // namespace headroom
