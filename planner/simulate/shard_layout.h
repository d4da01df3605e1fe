// What one data-parallel rank holds of each parameter, and which rank holds the most:
// the facts the simulator reads to replay a sharded step (see parallelism.h).
#pragma once

#include "planner/simulate/layer.h"

#include <cstdint>
#include <vector>

#include "planner/core/parallelism.h"
#include "planner/graph/op_graph.h"
#include "planner/simulate/tensor_states.h"

namespace headroom {

struct ShardLayout {
  int64_t rank = 0;  // the rank replayed: the one holding the most
  // Per parameter, in OpGraph::Parameters() order: whether this rank's optimizer keeps
  // its states (all but ZeRO-1's other partitions).
  std::vector<uint8_t> owns_optimizer_state;
  // DDP's reducer: the bytes of each flat gradient bucket, allocated when DDP is built
  // and kept for the whole run (reducer.cpp initialize_buckets).
  std::vector<int64_t> ddp_bucket_bytes;
};

// `parameters` in OpGraph::Parameters() order; `bytes` per tensor, as the simulator
// sizes them.
ShardLayout LayoutShards(const OpGraph& graph, const TensorStates& states,
                         const std::vector<TensorId>& parameters,
                         const std::vector<int64_t>& bytes, const Parallelism& parallel);

// ZeroRedundancyOptimizer's partition (_partition_parameters): parameters sorted by
// numel, largest first (a stable sort), each to the rank with the fewest elements so
// far (the lowest such rank). Returns the rank of each entry of `numels`.
std::vector<int64_t> PartitionLikeZeroRedundancy(const std::vector<int64_t>& numels,
                                                 int64_t world);

// DDP's bucket assignment (reducer.cpp compute_bucket_assignment_by_size): gradients in
// reverse registration order, a bucket closed once it reaches its cap: 1 MiB for the
// first (dist._DEFAULT_FIRST_BUCKET_BYTES), 25 MiB after (bucket_cap_mb).
std::vector<int64_t> DdpBucketBytes(const std::vector<int64_t>& grad_bytes_in_order);

}  // namespace headroom
