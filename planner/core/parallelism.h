// Data parallelism over many GPUs (or CPU processes): how many ranks, and what each one
// holds. headroom predicts one rank's memory (the busiest) for the engine that runs the
// scheme; it has no distributed runtime of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

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
enum class Sharding { kNone, kDdp, kZero1, kFsdp, kFsdpNoReshard };
inline constexpr EnumName<Sharding> kShardingNames[] = {{Sharding::kNone, "none"},
                                                        {Sharding::kDdp, "ddp"},
                                                        {Sharding::kZero1, "zero1"},
                                                        {Sharding::kFsdp, "fsdp"},
                                                        {Sharding::kFsdpNoReshard,
                                                         "fsdp-no-reshard"}};
inline std::string_view ShardingName(Sharding s) { return NameIn(kShardingNames, s); }
inline Result<Sharding> ParseSharding(std::string_view name) {
  return ParseIn(kShardingNames, name, "sharding");
}

struct Parallelism {
  int64_t gpus = 1;  // data-parallel ranks in all
  int64_t nodes = 1;
  Sharding sharding = Sharding::kNone;
  // DDP(gradient_as_bucket_view=True): gradients are views into the reducer's buckets
  // instead of separate tensors copied into them.
  bool ddp_bucket_view = false;

  bool distributed() const { return sharding != Sharding::kNone; }
  bool fsdp() const { return sharding == Sharding::kFsdp || sharding == Sharding::kFsdpNoReshard; }
  // Whether the scheme runs DDP's reducer (ZeRO-1 through torch runs under DDP).
  bool ddp_reducer() const { return sharding == Sharding::kDdp || sharding == Sharding::kZero1; }
  int64_t gpus_per_node() const { return gpus / nodes; }
  bool operator==(const Parallelism&) const = default;
};

// The checks a user sees: counts in range, whole nodes, and a scheme for more than one
// rank.
std::optional<Error> ValidateParallelism(const Parallelism& p);

}  // namespace headroom
