// DeepSpeed ZeRO-2's buffers over one training step of one rank (deepspeed/runtime/zero/
// stage_1_and_2.py, DeepSpeedZeroOptimizer with contiguous_gradients, its default). The
// step simulator calls the hooks where DeepSpeed runs them; buffers are taken and given
// back through its accounting (`Memory`), so they show in its timeline.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>
#include <functional>
#include <vector>

#include "planner/simulate/internal/replay_memory.h"
#include "planner/simulate/memory_category.h"
#include "planner/simulate/optimizer_model.h"
#include "planner/simulate/shard_layout.h"

namespace headroom {

class ZeroReplay {
 public:
  struct Sizes {
    int64_t reduce_bucket_size = 0;
    bool overlap_comm = false;
    bool gloo = false;  // CPU processes: gloo's collectives
    // offload_optimizer: the fp32 partition, its gradient and the states in CPU RAM.
    bool offload_optimizer = false;
  };

  // `flat_cost`: the optimizer over the rank's fp32 partition, one flat tensor.
  ZeroReplay(const ZeroPartition& partition, Sizes sizes, OptimizerParamCost flat_cost,
             ReplayMemory memory);

  // deepspeed.initialize: the padding that aligns the flat buffer, and the fp32 master
  // partition (a clone even when the parameters are fp32).
  void Setup();
  // The gradient hook of parameter i, its fresh gradient `grad`: copied into the bucket
  // and freed (the bucket reduced first when it would overflow). The first hook of a
  // backward sets the buckets up.
  void GradientReady(size_t i, int64_t grad);
  // independent_gradient_partition_epilogue: the last bucket reduced, the buckets freed
  // (nothing when no gradient arrived).
  void EndBackward();
  // step(): the partition's gradients flattened (and cast to fp32), grads_in_partition
  // freed, the optimizer run over the fp32 partition, the parameters all-gathered.
  void OptimizerStep(int step);

 private:
  static constexpr int64_t kNone = -1;
  // setup_buckets: the ipg bucket buffer(s) of reduce_bucket_size elements (two with
  // overlap_comm).
  void SetupBuckets();
  void Reduce();
  void AllGatherParameters();

  const ZeroPartition& partition_;
  const Sizes sizes_;
  const OptimizerParamCost flat_cost_;
  ReplayMemory memory_;
  std::vector<int64_t> ipg_buffers_;
  std::vector<size_t> bucket_params_;
  int64_t bucket_elements_ = 0;
  int64_t extra_large_grad_ = kNone;  // a gradient larger than the bucket, reduced alone
  int64_t grads_in_partition_ = kNone;
};

}  // namespace headroom
