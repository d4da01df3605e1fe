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

// One FSDP2 unit (torch/distributed/fsdp/_fully_shard): a decoder block, the root
// (every parameter no other unit claims), or with accelerate's wrap the input embedding
// and the [final norm, LM head] tail. Units are in forward order, the root last. Each parameter is
// sharded on dim 0 in torch.chunk rows, c = ceil(d / W), and padded to c rows on every rank
// (_fsdp_param.py, init_sharded_param).
struct FsdpUnit {
  std::vector<size_t> params;            // indices into the parameters
  std::vector<int64_t> unsharded_bytes;  // per parameter: W padded shards (copy-out)
  int64_t flat_bytes = 0;                // the all-gather output: W x the unit's shards
  int64_t reduce_input_bytes = 0;        // W x the trainable shards (reduce-scatter input)
  int64_t reduce_output_bytes = 0;       // the trainable shards: the sharded .grad
  // Under a MixedPrecisionPolicy: the flat copy of the shards cast to param_dtype before
  // the all-gather (freed once it is issued); and, when reduce_dtype is not the shards'
  // dtype, the sharded gradients cast back to it (_cast_and_view_sharded_grads), which
  // then hold the .grad while the reduce-scatter output goes.
  int64_t gather_cast_bytes = 0;
  int64_t sharded_grad_cast_bytes = 0;
  // chunk_cat's padded copy of each gradient whose dim 0 does not divide by W.
  std::vector<int64_t> pad_copy_bytes;
  bool trainable = false;  // whether anything is reduce-scattered
  int64_t world = 0;       // ranks the unit is sharded over
  // The ops whose forward runs the unit's modules: gathered before first_op, its
  // post-forward after last_op; pre-backward before last_op's backward, post-backward
  // after first_op's. Unused for the root, which spans the whole step.
  int first_op = -1, last_op = -1;
  bool reshard_after_forward = true;
  // The unit's inputs need no gradient (the root; the first block over a frozen
  // embedding): its post-backward runs in the final callback of the backward.
  bool deferred_post_backward = false;
};

// DeepSpeed ZeRO-2's flat group (stage_1_and_2.py, __init__): the trainable parameters
// in the optimizer's order flattened into one buffer, padded to a multiple of 2W
// elements (nccl_start_alignment_factor 2), cut into W equal partitions; the parameters
// become views of it. Each rank owns one partition of the fp32 master weights, the
// optimizer states and the reduced gradients.
struct ZeroPartition {
  int64_t partition_numel = 0;  // aligned total / W
  int64_t padding_numel = 0;    // the zeros appended to align the flat buffer
  // This rank's params_in_partition: every parameter with an element in its partition,
  // counted whole (copy_grads_in_partition sizes grads_in_partition by them).
  int64_t grads_in_partition_numel = 0;
  int64_t element_bytes = 4;          // the flat buffer's dtype (and its gradients')
  std::vector<int64_t> numel;         // per parameter (0 when frozen)
  std::vector<uint8_t> in_partition;  // per parameter: in this rank's partition
};

// DeepSpeed ZeRO-3 (runtime/zero/stage3.py, partition_parameters.py, parameter_offload.py,
// partitioned_param_coordinator.py). Every parameter is cut into W partitions of
// c = ceil(p / W) elements; each rank stores one (the trainable ones in one flat buffer).
// A module's direct parameters are all-gathered before its forward and its backward and
// released after; from the second forward on, the coordinator replays the trace of module
// calls it recorded in the first: it prefetches ahead and keeps what is reused soon.
// Modules here are the ones that hold parameters (from the parameters' names), each
// preceded by the calls of the containers it opens (the decoder layer, its attention,
// the MLP, ...), which prefetch but gather nothing of their own.
struct Zero3Module {
  std::vector<size_t> params;       // its direct parameters, in registration (ds_id) order
  int first_op = -1, last_op = -1;  // the forward ops that read them
  // Container calls just before this module's, in forward and in backward (the first
  // module of a subtree opens it; the last one opens it first in backward).
  int containers_before_forward = 0, containers_before_backward = 0;
  // Its output needs a gradient: its pre-backward hook runs (otherwise no backward call).
  bool in_backward = false;
  // Its input needs a gradient: its post-backward hook runs (otherwise the parameters
  // wait for release_backward_leftovers at the end of the backward).
  bool post_backward = false;
};

struct Zero3Layout {
  int64_t world = 1;
  std::vector<int64_t> numel;            // per parameter: ds_numel
  std::vector<int64_t> partition_numel;  // per parameter: ceil(numel / W)
  std::vector<int64_t> element_bytes;    // per parameter
  std::vector<uint8_t> trainable;        // per parameter
  std::vector<uint8_t> persistent;       // ds_persist: numel <= param_persistence_threshold
  std::vector<Zero3Module> modules;      // in forward order
  std::vector<int> module_starting,
      module_ending;  // per op: the module whose ops begin / end there
  // Containers called before the first module (the model itself; PEFT's two wrappers).
  int root_containers = 1;
  // Optimizer sub-groups (sub_group_size): the trainable parameters in order, a group
  // closed once its partitions reach the size; per group, its partition elements.
  std::vector<int64_t> sub_group_numel;
  int64_t grad_element_bytes = 4;  // the gradients' (and reduce bucket's) dtype
};

struct ShardLayout {
  int64_t rank = 0;  // the rank replayed: the one holding the most, unless asked
  // ZeRO-2: another rank that may peak higher (the one with the largest
  // grads_in_partition, when it is not `rank`); -1 if none.
  int64_t other_candidate_rank = -1;
  // Per parameter, in OpGraph::Parameters() order: whether this rank's optimizer keeps
  // its states (all but ZeRO-1's other partitions).
  std::vector<uint8_t> owns_optimizer_state;
  // DDP's reducer: the bytes of each flat gradient bucket, allocated when DDP is built
  // and kept for the whole run (reducer.cpp initialize_buckets).
  std::vector<int64_t> ddp_bucket_bytes;
  // FSDP2: per parameter, the padded shard this rank stores; per unit (blocks in order,
  // then the root) what it gathers and reduces; the device mesh's rank tensor.
  std::vector<int64_t> local_param_bytes;
  std::vector<int64_t> local_rows;  // rows of dim 0 this rank's optimizer updates
  std::vector<FsdpUnit> fsdp_units;
  // Per op: the unit (not the root) whose first_op / last_op it is; -1 if none.
  std::vector<int> fsdp_unit_starting, fsdp_unit_ending;
  int64_t mesh_bytes = 0;
  ZeroPartition zero;  // DeepSpeed ZeRO-2
  Zero3Layout zero3;   // DeepSpeed ZeRO-3
};

// `parameters` in OpGraph::Parameters() order; `bytes` per tensor, as the simulator
// sizes them.
ShardLayout LayoutShards(const OpGraph& graph, const TensorStates& states,
                         const std::vector<TensorId>& parameters, const std::vector<int64_t>& bytes,
                         const Parallelism& parallel, bool cuda);

// ZeroRedundancyOptimizer's partition (_partition_parameters): parameters sorted by
// numel, largest first (a stable sort), each to the rank with the fewest elements so
// far (the lowest such rank). Returns the rank of each entry of `numels`.
std::vector<int64_t> PartitionLikeZeroRedundancy(const std::vector<int64_t>& numels, int64_t world);

// ZeRO-2's partition of trainable parameters of `numels` (in the optimizer's order) over
// `world` ranks, seen from `rank`.
ZeroPartition PartitionLikeDeepSpeed(const std::vector<int64_t>& numels, int64_t world,
                                     int64_t rank);

// ZeRO-3's layout of `parameters` (in OpGraph::Parameters() order, `bytes` per tensor).
Zero3Layout LayoutZero3(const OpGraph& graph, const TensorStates& states,
                        const std::vector<TensorId>& parameters, const std::vector<int64_t>& bytes,
                        const Parallelism& parallel);

// DDP's bucket assignment (reducer.cpp compute_bucket_assignment_by_size): gradients in
// reverse registration order, a bucket closed once it reaches its cap: 1 MiB for the
// first (dist._DEFAULT_FIRST_BUCKET_BYTES), 25 MiB after (bucket_cap_mb).
std::vector<int64_t> DdpBucketBytes(const std::vector<int64_t>& grad_bytes_in_order);

}  // namespace headroom
