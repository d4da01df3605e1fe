#include "planner/simulate/internal/zero_replay.h"

#include <algorithm>
#include <utility>

namespace headroom {

ZeroReplay::ZeroReplay(const ZeroPartition& partition, Sizes sizes, OptimizerParamCost flat_cost,
                       ReplayMemory memory)
    : partition_(partition),
      sizes_(sizes),
      flat_cost_(std::move(flat_cost)),
      memory_(std::move(memory)) {}

void ZeroReplay::Setup() {
  if (partition_.padding_numel > 0)
    memory_.acquire_persistent(partition_.padding_numel * partition_.element_bytes,
                               Category::kWeights);
  if (!sizes_.offload_optimizer) {
    memory_.acquire_persistent(partition_.partition_numel * 4, Category::kOptimizer);
    return;
  }
  // Offloaded, the device keeps temp_grad_buffer_for_gpu_offload: the largest
  // parameter's elements in the parameters' dtype (DeepSpeedZeroOptimizer __init__).
  int64_t largest = 0;
  for (int64_t n : partition_.numel) largest = std::max(largest, n);
  memory_.acquire_persistent(largest * partition_.element_bytes, Category::kGradients);
}

void ZeroReplay::SetupBuckets() {
  const int64_t bytes = sizes_.reduce_bucket_size * partition_.element_bytes;
  for (int k = 0; k < (sizes_.overlap_comm ? 2 : 1); ++k)
    ipg_buffers_.push_back(memory_.acquire(bytes, Category::kGradients));
}

// reduce_independent_p_g_buckets_and_remove_grads: a gradient that no longer fits sends
// the bucket off first; one larger than the whole bucket stays where it is and goes
// alone; the others are copied in and their .grad made a view of the bucket.
void ZeroReplay::GradientReady(size_t i, int64_t grad) {
  if (ipg_buffers_.empty()) SetupBuckets();  // the first hook of this backward
  const int64_t numel = partition_.numel[i];
  if (bucket_elements_ + numel > sizes_.reduce_bucket_size) Reduce();
  if (numel > sizes_.reduce_bucket_size) {
    extra_large_grad_ = grad;
  } else {
    memory_.release(grad);
  }
  bucket_elements_ += numel;
  bucket_params_.push_back(i);
}

// reduce_ipg_grads -> average_tensor -> allreduce_and_scatter: the bucket's slices are
// flattened into one tensor (allreduce_and_copy_with_multiple_ranks), all-reduced and
// copied back; then each gradient in this rank's partition is copied into
// grads_in_partition (allocated at the first one), the others dropped.
void ZeroReplay::Reduce() {
  if (bucket_params_.empty()) return;
  const int64_t flat =
      memory_.acquire(bucket_elements_ * partition_.element_bytes, Category::kTemporaries);
  memory_.release(flat);
  for (size_t i : bucket_params_) {
    if (sizes_.offload_optimizer) {
      // async_inplace_copy_grad_to_fp32_buffer_from_gpu: a 16-bit slice is cast to fp32
      // on the device before its copy to the CPU partition (at most the whole gradient).
      if (partition_.in_partition[i] && partition_.element_bytes != 4)
        memory_.release(memory_.acquire(partition_.numel[i] * 4, Category::kTemporaries));
      continue;
    }
    if (partition_.in_partition[i] && grads_in_partition_ == kNone) {
      grads_in_partition_ = memory_.acquire(
          partition_.grads_in_partition_numel * partition_.element_bytes, Category::kGradients);
    }
  }
  if (extra_large_grad_ != kNone) memory_.release(extra_large_grad_);
  extra_large_grad_ = kNone;
  bucket_params_.clear();
  bucket_elements_ = 0;
}

void ZeroReplay::EndBackward() {
  Reduce();
  for (int64_t b : ipg_buffers_) memory_.release(b);
  ipg_buffers_.clear();
}

void ZeroReplay::OptimizerStep(int step) {
  if (sizes_.offload_optimizer) {  // the step runs on the CPU
    AllGatherParameters();
    return;
  }
  const int64_t part = partition_.partition_numel;
  // flatten(averaged_gradients), then .to(fp32): a second copy unless already fp32.
  int64_t grad = memory_.acquire(part * partition_.element_bytes, Category::kGradients);
  if (partition_.element_bytes != 4) {
    const int64_t fp32 = memory_.acquire(part * 4, Category::kGradients);
    memory_.release(grad);
    grad = fp32;
  }
  if (grads_in_partition_ != kNone) memory_.release(grads_in_partition_);
  grads_in_partition_ = kNone;
  StepOverFlatTensor(memory_, flat_cost_, step);
  memory_.release(grad);
  AllGatherParameters();
}

void ZeroReplay::AllGatherParameters() {
  // all_gather_dp_groups -> all_gather_into_tensor into the flat buffer in place; gloo
  // gathers into a flat copy of the output first (ProcessGroupGloo allgather).
  if (sizes_.gloo) {
    int64_t flat = partition_.padding_numel;
    for (int64_t n : partition_.numel) flat += n;
    memory_.release(memory_.acquire(flat * partition_.element_bytes, Category::kTemporaries));
  }
}

}  // namespace headroom
