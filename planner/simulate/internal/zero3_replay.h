// DeepSpeed ZeRO-3's buffers over one rank's training step (deepspeed 0.19: runtime/zero/
// stage3.py, partition_parameters.py, partitioned_param_coordinator.py,
// parameter_offload.py). The step simulator calls the hooks where DeepSpeed's module
// hooks run; buffers are taken and given back through its accounting (`Memory`).
//
// The first forward records the trace of module calls; from the second on, the
// coordinator replays it: at each call it prefetches the parameters of the calls ahead
// (prefetch_bucket_size elements per call, max_live_parameters gathered at most), and a
// module's parameters are kept after its call when they are prefetched for a later one
// or used again within max_reuse_distance elements of calls.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>
#include <vector>

#include "planner/simulate/internal/replay_memory.h"
#include "planner/simulate/memory_category.h"
#include "planner/simulate/optimizer_model.h"
#include "planner/simulate/shard_layout.h"

namespace headroom {

class Zero3Replay {
 public:
  struct Sizes {
    int64_t reduce_bucket_size = 0;
    int64_t prefetch_bucket_size = 0;
    int64_t max_live_parameters = 0;
    int64_t max_reuse_distance = 1'000'000'000;  // stage3_max_reuse_distance's default
    bool gloo = false;                           // CPU processes: gloo's collectives
  };

  // `sub_group_costs`: the optimizer over each sub-group's fp32 partition (one tensor).
  Zero3Replay(const Zero3Layout& layout, Sizes sizes,
              std::vector<OptimizerParamCost> sub_group_costs, ReplayMemory memory);

  // deepspeed.initialize: the fp32 partitions, the gradient partitions, the reduce
  // bucket, and the persistent parameters gathered (the partitions themselves are the
  // simulator's weights).
  void Setup();
  // The model's forward pre-hook (reset_step), then its own and PEFT's wrappers' calls.
  void StartForward();
  void BeforeOpForward(int op) {
    if (layout_.module_starting[op] >= 0) ModuleForward(layout_.module_starting[op]);
  }
  void AfterOpForward(int op) {
    if (layout_.module_ending[op] >= 0) ReleaseModule(layout_.module_ending[op]);
  }
  // The outermost modules' pre-backward calls (the loss's gradient reaches them first).
  void StartBackward();
  void BeforeOpBackward(int op);
  void AfterOpBackward(int op);
  // The gradient hook of parameter i, its fresh gradient `grad`.
  void GradientReady(size_t i, int64_t grad);
  // independent_gradient_partition_epilogue (the last bucket reduced), then
  // release_backward_leftovers.
  void EndBackward();
  void OptimizerStep(int step);

 private:
  enum class Status : uint8_t { kPartitioned, kInflight, kAvailable };
  struct Gather {                // one all_gather_coalesced handle
    std::vector<int64_t> flats;  // the flat outputs (one per dtype); empty for one parameter
    std::vector<size_t> params;
    int unwaited = 0;
    bool waited = false;
  };
  struct QueuedUse {
    size_t param;
    int step;
  };
  static constexpr int64_t kNone = -1;
  static constexpr int kContainer = -1;

  void Call(int module);  // fetch_sub_module
  void ModuleForward(int module);
  void StartGather(std::vector<size_t> params);
  void Wait(size_t param);
  void Prefetch();
  void ReleaseModule(int module);
  void ReleaseParam(size_t param);
  void GatherPersistent();
  void Reduce();
  void AllGatherScratch(int64_t output_bytes);

  const Zero3Layout& layout_;
  const Sizes sizes_;
  const std::vector<OptimizerParamCost> sub_group_costs_;
  ReplayMemory memory_;
  std::vector<Status> status_;
  std::vector<int64_t> storage_;  // per parameter: its gathered tensor's buffer
  std::vector<int> gather_of_;    // per parameter in flight: its handle
  std::vector<Gather> gathers_;
  std::vector<int64_t> persistent_storage_;
  int64_t available_numel_ = 0;  // __n_available_params
  // The trace: recorded in the first forward and backward, replayed from the second.
  bool recording_ = false, complete_ = false;
  std::vector<int> trace_;  // per call: the module, or kContainer
  std::vector<QueuedUse> queue_;
  size_t queue_next_ = 0;
  std::vector<int> fetched_for_;  // per parameter: __most_recent_step_id_param_fetched_for
  int step_id_ = 0;
  std::vector<uint8_t> in_backward_;         // per module: fetched for backward, not yet released
  std::vector<int> awaiting_post_backward_;  // fetched in backward, with no post-backward hook
  // The reduce bucket: parameters whose gradients it holds, and their elements.
  std::vector<size_t> bucket_params_;
  std::vector<int64_t> own_grads_;  // gradients larger than the bucket, kept as they are
  int64_t bucket_numel_ = 0;
};

}  // namespace headroom
