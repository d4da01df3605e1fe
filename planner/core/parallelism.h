// Data parallelism over many GPUs (or CPU processes): how many ranks, and what each one
// holds. headroom predicts one rank's memory (the busiest) for the engine that runs the
// scheme; it has no distributed runtime of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "planner/core/dtype.h"
#include "planner/core/enum_table.h"
#include "planner/core/result.h"

namespace headroom {

// What each rank holds of the model state:
//   ddp              everything; DDP's reducer adds flat gradient buckets
//   zero1            everything but the optimizer states of other ranks' parameters
//                    (DDP + torch's ZeroRedundancyOptimizer)
//   fsdp             FSDP2 fully_shard, one unit per block: parameters, gradients and
//                    states sharded; a unit's parameters gathered around its forward and
//                    its backward (reshard_after_forward=True)
//   fsdp-no-reshard  the same, holding each unit's gathered parameters from its forward
//                    to its backward (reshard_after_forward=False)
//   zero2            DeepSpeed ZeRO stage 2: one flat copy of the parameters on every
//                    rank; fp32 master weights, optimizer states and gradients
//                    partitioned (deepspeed/runtime/zero/stage_1_and_2.py)
//   zero3            DeepSpeed ZeRO stage 3: parameters partitioned too, gathered per
//                    module around its forward and backward (runtime/zero/stage3.py)
enum class Sharding { kNone, kDdp, kZero1, kFsdp, kFsdpNoReshard, kZero2, kZero3 };
inline constexpr EnumName<Sharding> kShardingNames[] = {
    {Sharding::kNone, "none"},
    {Sharding::kDdp, "ddp"},
    {Sharding::kZero1, "zero1"},
    {Sharding::kFsdp, "fsdp"},
    {Sharding::kFsdpNoReshard, "fsdp-no-reshard"},
    {Sharding::kZero2, "zero2"},
    {Sharding::kZero3, "zero3"}};
inline std::string_view ShardingName(Sharding s) { return NameIn(kShardingNames, s); }
inline Result<Sharding> ParseSharding(std::string_view name) {
  return ParseIn(kShardingNames, name, "sharding");
}

// DeepSpeed's zero_optimization knobs that size its buffers, counted in elements, with
// DeepSpeed's defaults (deepspeed/runtime/zero/config.py). The exported config writes
// them; --deepspeed-config reads them from a user's.
struct DeepSpeedZeroKnobs {
  int64_t reduce_bucket_size = 500'000'000;
  int64_t allgather_bucket_size = 500'000'000;
  // None: DeepSpeed's dynamic default, true for stage 3 only (overlap_comm_valid).
  std::optional<bool> overlap_comm;
  int64_t stage3_prefetch_bucket_size = 50'000'000;
  int64_t stage3_max_live_parameters = 1'000'000'000;
  int64_t stage3_param_persistence_threshold = 100'000;
  bool operator==(const DeepSpeedZeroKnobs&) const = default;
};

// Where the optimizer's fp32 states (and, with ZeRO-3 or FSDP, the parameters) live.
//   none               on the GPU
//   optimizer          DeepSpeed offload_optimizer: the fp32 master weights, their
//                      gradients and the optimizer states in CPU RAM, the step run there
//   optimizer+params   the parameter shards too: ZeRO-3 offload_param, or FSDP2's
//                      CPUOffloadPolicy (which offloads shards, gradients and states)
enum class Offload { kNone, kOptimizer, kOptimizerAndParams };
inline constexpr EnumName<Offload> kOffloadNames[] = {
    {Offload::kNone, "none"},
    {Offload::kOptimizer, "optimizer"},
    {Offload::kOptimizerAndParams, "optimizer+params"}};
inline std::string_view OffloadName(Offload o) { return NameIn(kOffloadNames, o); }
inline Result<Offload> ParseOffload(std::string_view name) {
  return ParseIn(kOffloadNames, name, "offload");
}

// Which modules become FSDP2 units.
//   blocks      fully_shard on each decoder block, then the root (everything else), the
//               layout torchtitan uses and a plain PyTorch script writes
//   accelerate  accelerate's fsdp2_prepare_model (HF Trainer, accelerate launch): the
//               blocks, the input embedding alone (untied), the final norm and the LM head
//               as one never-resharded unit (with the embedding when tied), then the root
enum class FsdpWrap { kBlocks, kAccelerate };
inline constexpr EnumName<FsdpWrap> kFsdpWrapNames[] = {{FsdpWrap::kBlocks, "blocks"},
                                                        {FsdpWrap::kAccelerate, "accelerate"}};

struct Parallelism {
  int64_t gpus = 1;  // data-parallel ranks in all
  int64_t nodes = 1;
  Sharding sharding = Sharding::kNone;
  // DDP(gradient_as_bucket_view=True): gradients are views into the reducer's buckets
  // instead of separate tensors copied into them.
  bool ddp_bucket_view = false;
  // The rank to replay (--rank); unset: the busiest. Ranks differ under ZeRO-1 and
  // ZeRO-2 (which partition they own); the others replay alike.
  std::optional<int64_t> rank;
  Offload offload = Offload::kNone;
  DeepSpeedZeroKnobs deepspeed;
  FsdpWrap fsdp_wrap = FsdpWrap::kBlocks;
  // FSDP2's MixedPrecisionPolicy (torch/distributed/fsdp/_fully_shard/_fsdp_api.py),
  // read under fsdp and fsdp-no-reshard only. param_dtype: the dtype each shard is cast to
  // before the all-gather, and so what the unit gathers, computes in and produces
  // gradients in; the shards, their gradients and the optimizer states keep the
  // parameters' own dtype. reduce_dtype: the reduce-scatter's; unset, torch 2.15 reduces
  // in the parameters' own dtype (the grad_dtype, not param_dtype as before 2.9).
  // Unset param_dtype: no policy.
  std::optional<DType> fsdp_param_dtype;
  std::optional<DType> fsdp_reduce_dtype;

  bool distributed() const { return sharding != Sharding::kNone; }
  bool fsdp() const { return sharding == Sharding::kFsdp || sharding == Sharding::kFsdpNoReshard; }
  bool deepspeed_zero() const {
    return sharding == Sharding::kZero2 || sharding == Sharding::kZero3;
  }
  bool overlap_comm() const {
    return deepspeed.overlap_comm.value_or(sharding == Sharding::kZero3);
  }
  // Whether the scheme runs DDP's reducer (ZeRO-1 through torch runs under DDP).
  bool ddp_reducer() const { return sharding == Sharding::kDdp || sharding == Sharding::kZero1; }
  int64_t gpus_per_node() const { return gpus / nodes; }
  bool operator==(const Parallelism&) const = default;
};

// The GPUs of one machine: the HGX/DGX boards of every data-center GPU in the catalog,
// and the usual 8-slot server of the consumer cards.
inline constexpr int64_t kGpusPerNode = 8;

// The nodes `gpus` ranks run on when none are given: the fewest machines of at most
// kGpusPerNode GPUs that hold the count evenly (16: 2 x 8; 12: 2 x 6; up to 8: one).
int64_t DefaultNodes(int64_t gpus);

// The checks a user sees: counts in range, whole nodes, and a scheme for more than one
// rank.
std::optional<Error> ValidateParallelism(const Parallelism& p);

}  // namespace headroom
