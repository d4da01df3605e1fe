#include "planner/simulate/shard_layout.h"

#include <algorithm>
#include <numeric>

namespace headroom {

std::vector<int64_t> PartitionLikeZeroRedundancy(const std::vector<int64_t>& numels,
                                                 int64_t world) {
  std::vector<size_t> order(numels.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return numels[a] > numels[b]; });
  std::vector<int64_t> load(world, 0), rank_of(numels.size(), 0);
  for (size_t i : order) {
    const int64_t r = std::min_element(load.begin(), load.end()) - load.begin();
    rank_of[i] = r;
    load[r] += numels[i];
  }
  return rank_of;
}

ZeroPartition PartitionLikeDeepSpeed(const std::vector<int64_t>& numels, int64_t world,
                                     int64_t rank) {
  ZeroPartition z;
  z.numel = numels;
  const int64_t total = std::accumulate(numels.begin(), numels.end(), int64_t{0});
  const int64_t alignment = 2 * world;
  const int64_t aligned = (total + alignment - 1) / alignment * alignment;
  z.partition_numel = aligned / world;
  z.padding_numel = aligned - total;
  const int64_t lo = rank * z.partition_numel, hi = lo + z.partition_numel;
  z.in_partition.assign(numels.size(), 0);
  int64_t offset = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    if (numels[i] > 0 && offset < hi && offset + numels[i] > lo) {
      z.in_partition[i] = 1;
      z.grads_in_partition_numel += numels[i];
    }
    offset += numels[i];
  }
  return z;
}

std::vector<int64_t> DdpBucketBytes(const std::vector<int64_t>& grad_bytes_in_order) {
  constexpr int64_t kFirstCap = int64_t{1} << 20, kCap = int64_t{25} << 20;
  std::vector<int64_t> buckets;
  int64_t open = 0;
  for (auto it = grad_bytes_in_order.rbegin(); it != grad_bytes_in_order.rend(); ++it) {
    open += *it;
    if (open >= (buckets.empty() ? kFirstCap : kCap)) {
      buckets.push_back(open);
      open = 0;
    }
  }
  if (open > 0) buckets.push_back(open);
  return buckets;
}

namespace {

// The block whose ops read the parameter; the root's (the last unit) when it is read
// outside the blocks or by several.
int UnitOf(const OpGraph& graph, TensorId param) {
  const int root = static_cast<int>(graph.blocks().size());
  int unit = -1;
  for (OpId op : graph.Consumers(param)) {
    const int block = graph.op(op).block;
    if (block < 0 || (unit >= 0 && unit != block)) return root;
    unit = block;
  }
  return unit >= 0 ? unit : root;
}

// The unit of each parameter under `wrap`, as an index into the units that LayoutFsdp
// lays out: [embedding (accelerate, untied)] blocks... [tail (accelerate)] root.
struct FsdpUnitPlan {
  std::vector<int> unit_of;  // per parameter
  int num_units = 0;
  int first_block = 0;  // the unit of block 0
  int tail = -1, embedding = -1;
};

FsdpUnitPlan PlanFsdpUnits(const OpGraph& graph, const std::vector<TensorId>& parameters,
                           FsdpWrap wrap) {
  const int num_blocks = static_cast<int>(graph.blocks().size());
  FsdpUnitPlan plan;
  plan.unit_of.assign(parameters.size(), -1);
  std::vector<int> block_of(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) block_of[i] = UnitOf(graph, parameters[i]);
  if (wrap == FsdpWrap::kAccelerate && num_blocks > 0) {
    // fsdp2_prepare_model: get_input_embeddings() alone when untied; the final norm and
    // get_output_embeddings() (and a tied input embedding) as one group; the root keeps
    // whatever is left (a position embedding).
    const int first_block_op = graph.blocks().front().first_op.value;
    const int last_block_op = graph.blocks().back().last_op.value;
    const TensorId embedding = graph.InputEmbeddingTable();
    std::vector<uint8_t> in_tail(parameters.size(), 0);
    bool any_tail = false, untied_embedding = false;
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (block_of[i] != num_blocks) continue;
      bool before = true, after = true;
      for (OpId op : graph.Consumers(parameters[i])) {
        before = before && op.value < first_block_op;
        after = after && op.value > last_block_op;
      }
      if (parameters[i] == embedding && before) {
        untied_embedding = true;
      } else if (after || parameters[i] == embedding) {
        in_tail[i] = 1;
        any_tail = true;
      }
    }
    plan.embedding = untied_embedding ? 0 : -1;
    plan.first_block = untied_embedding ? 1 : 0;
    plan.tail = any_tail ? plan.first_block + num_blocks : -1;
    plan.num_units = plan.first_block + num_blocks + (any_tail ? 1 : 0) + 1;
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (block_of[i] < num_blocks)
        plan.unit_of[i] = plan.first_block + block_of[i];
      else if (untied_embedding && parameters[i] == embedding)
        plan.unit_of[i] = 0;
      else if (in_tail[i])
        plan.unit_of[i] = plan.tail;
      else
        plan.unit_of[i] = plan.num_units - 1;
    }
    return plan;
  }
  plan.num_units = num_blocks + 1;
  plan.unit_of = block_of;
  return plan;
}

// Per op, the unit whose hooks fire around it (the root's span the whole step).
void IndexUnitOps(int num_ops, ShardLayout& layout) {
  layout.fsdp_unit_starting.assign(num_ops, -1);
  layout.fsdp_unit_ending.assign(num_ops, -1);
  for (size_t u = 0; u + 1 < layout.fsdp_units.size(); ++u) {
    layout.fsdp_unit_starting[layout.fsdp_units[u].first_op] = static_cast<int>(u);
    layout.fsdp_unit_ending[layout.fsdp_units[u].last_op] = static_cast<int>(u);
  }
}

// Rank 0's padded shard of one parameter (torch.chunk's full rows).
struct Shard {
  int64_t rows = 0;
  int64_t stored_bytes = 0;
};

// QLoRA's NF4 weight as bitsandbytes stores it for FSDP (`bnb_4bit_quant_storage=bf16`,
// `Params4bit`): a [packed bytes / 2, 1] bf16 tensor of packed 4-bit pairs, sharded and
// gathered as such. Its QuantState (absmax, codes) is a module attribute that FSDP never
// sees: whole on every rank. Frozen: no reduction.
Shard AddNf4Shard(const TensorInfo& info, FsdpUnit& unit) {
  constexpr int64_t kQuantStorageBytes = 2;  // bf16
  const int64_t numel = info.shape.Numel({});
  const int64_t packed = StorageBytes(DType::kNF4, numel);
  const int64_t rows = (packed + kQuantStorageBytes - 1) / kQuantStorageBytes;
  const int64_t chunk = (rows + unit.world - 1) / unit.world;
  const int64_t gathered = unit.world * chunk * kQuantStorageBytes;
  unit.unsharded_bytes.push_back(gathered);
  unit.flat_bytes += gathered;
  return {chunk, chunk * kQuantStorageBytes + Nf4StorageBytes(numel) - packed};
}

// Adds one parameter's shard to its unit: what is gathered, cast and reduced. The shard
// is stored in the parameter's own dtype and gathered in param_dtype when a
// MixedPrecisionPolicy casts it; the reduce-scatter runs in reduce_dtype (unset: the
// shard's, as torch 2.15 follows grad_dtype).
Shard AddShard(const TensorInfo& info, const TensorState& state, int64_t gathered_bytes,
               std::optional<DType> reduce_dtype, FsdpUnit& unit) {
  if (state.stored_dtype == DType::kNF4) return AddNf4Shard(info, unit);
  const int64_t world = unit.world;
  const int64_t numel = info.shape.Numel({});
  const int64_t rows = info.shape.dims().empty() ? 1 : info.shape.dims()[0].value;
  const int64_t per_row = rows > 0 ? numel / rows : 0;
  const int64_t chunk = (rows + world - 1) / world;
  const int64_t shard_numel = chunk * per_row;
  const int64_t gathered = numel > 0 ? shard_numel * (gathered_bytes / numel) : 0;
  const int64_t stored = StorageBytes(state.stored_dtype, shard_numel);
  unit.unsharded_bytes.push_back(world * gathered);
  unit.flat_bytes += world * gathered;
  if (state.dtype != state.stored_dtype) unit.gather_cast_bytes += gathered;
  if (state.requires_grad) {
    unit.trainable = true;
    const DType reduce = reduce_dtype.value_or(state.stored_dtype);
    unit.reduce_input_bytes += world * StorageBytes(reduce, shard_numel);
    unit.reduce_output_bytes += StorageBytes(reduce, shard_numel);
    if (reduce != state.stored_dtype) unit.sharded_grad_cast_bytes += stored;
    if (rows % world != 0) unit.pad_copy_bytes.push_back(world * gathered);
  }
  return {chunk, stored};
}

// FSDP2 on rank 0 (the busiest: torch.chunk gives it full rows, and every rank stores
// padded shards, so only the optimizer states of trailing ranks can be smaller).
void LayoutFsdp(const OpGraph& graph, const TensorStates& states,
                const std::vector<TensorId>& parameters, const std::vector<int64_t>& bytes,
                const Parallelism& parallel, bool cuda, ShardLayout& layout) {
  const int64_t world = parallel.gpus;
  const int num_blocks = static_cast<int>(graph.blocks().size());
  const FsdpUnitPlan plan = PlanFsdpUnits(graph, parameters, parallel.fsdp_wrap);
  const bool reshard = parallel.sharding == Sharding::kFsdp;
  layout.fsdp_units.assign(plan.num_units,
                           FsdpUnit{.world = world, .reshard_after_forward = reshard});
  layout.local_param_bytes.assign(parameters.size(), 0);
  layout.local_rows.assign(parameters.size(), 0);
  for (size_t i = 0; i < parameters.size(); ++i) {
    FsdpUnit& unit = layout.fsdp_units[plan.unit_of[i]];
    unit.params.push_back(i);
    const Shard shard =
        AddShard(graph.tensor(parameters[i]), states[parameters[i]], bytes[parameters[i].value],
                 states.target().fsdp_reduce_dtype, unit);
    layout.local_param_bytes[i] = shard.stored_bytes;
    layout.local_rows[i] = shard.rows;
  }
  // Where each unit's hooks fire: a block's segment; the embedding's and the tail's ops.
  for (int b = 0; b < num_blocks; ++b) {
    FsdpUnit& unit = layout.fsdp_units[plan.first_block + b];
    unit.first_op = graph.blocks()[b].first_op.value;
    unit.last_op = graph.blocks()[b].last_op.value;
    // A block's post-backward hook sits on its input; over a frozen embedding (and with
    // no hook making the embedding's output require grad) that input needs no gradient.
    unit.deferred_post_backward = !states[graph.blocks()[b].input].requires_grad;
  }
  for (int u : {plan.embedding, plan.tail}) {
    if (u < 0) continue;
    FsdpUnit& unit = layout.fsdp_units[u];
    unit.first_op = graph.num_ops();
    for (size_t i : unit.params)
      for (OpId op : graph.Consumers(parameters[i])) {
        unit.first_op = std::min(unit.first_op, op.value);
        unit.last_op = std::max(unit.last_op, op.value);
      }
    // The embedding reads token ids, which need no gradient: its post-backward waits for
    // the final callback.
    unit.deferred_post_backward = u == plan.embedding;
  }
  if (plan.tail >= 0) layout.fsdp_units[plan.tail].reshard_after_forward = false;
  IndexUnitOps(graph.num_ops(), layout);
  layout.fsdp_units.back().deferred_post_backward = true;
  layout.fsdp_units.back().reshard_after_forward = false;
  // DeviceMesh keeps torch.arange(W) (int32 here) on the CPU: device memory only there.
  layout.mesh_bytes = cuda ? 0 : 4 * world;
}

// ZeRO-2: the flat partition of the rank replayed (the busiest unless asked).
void LayoutZero2(const OpGraph& graph, const std::vector<TensorId>& parameters,
                 const std::vector<int64_t>& bytes, const std::vector<size_t>& trainable_index,
                 const Parallelism& parallel, ShardLayout& layout) {
  std::vector<int64_t> numels(parameters.size(), 0);
  for (size_t i : trainable_index) numels[i] = graph.tensor(parameters[i]).shape.Numel({});
  // Every rank holds the same flat buffer, buckets and partition sizes; they differ in
  // when grads_in_partition is allocated: at the first reduction that carries one of
  // their parameters. Backward reduces the last parameters first, so the rank holding
  // the last element allocates it while the most activations are still live.
  const ZeroPartition whole = PartitionLikeDeepSpeed(numels, parallel.gpus, 0);
  const int64_t total = std::accumulate(numels.begin(), numels.end(), int64_t{0});
  const int64_t first_reduced = total > 0 ? (total - 1) / whole.partition_numel : 0;
  layout.rank = parallel.rank.value_or(first_reduced);
  layout.zero = PartitionLikeDeepSpeed(numels, parallel.gpus, layout.rank);
  for (size_t i : trainable_index)
    if (numels[i] > 0) layout.zero.element_bytes = bytes[parameters[i].value] / numels[i];
  if (!parallel.rank) {
    // ... or the rank whose grads_in_partition is largest, if that is another: each
    // parameter counts whole on every rank its elements reach.
    std::vector<int64_t> per_rank(parallel.gpus, 0);
    int64_t offset = 0;
    for (int64_t n : numels) {
      if (n > 0)
        for (int64_t r = offset / whole.partition_numel;
             r <= (offset + n - 1) / whole.partition_numel; ++r)
          per_rank[r] += n;
      offset += n;
    }
    const int64_t largest_rank =
        std::max_element(per_rank.begin(), per_rank.end()) - per_rank.begin();
    if (per_rank[largest_rank] > per_rank[first_reduced])
      layout.other_candidate_rank = largest_rank;
  }
  std::fill(layout.owns_optimizer_state.begin(), layout.owns_optimizer_state.end(), 0);
}

}  // namespace

ShardLayout LayoutShards(const OpGraph& graph, const TensorStates& states,
                         const std::vector<TensorId>& parameters, const std::vector<int64_t>& bytes,
                         const Parallelism& parallel, bool cuda) {
  ShardLayout layout;
  if (parallel.fsdp()) LayoutFsdp(graph, states, parameters, bytes, parallel, cuda, layout);
  layout.owns_optimizer_state.assign(parameters.size(), 1);
  std::vector<int64_t> trainable_bytes;
  std::vector<size_t> trainable_index;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!states[parameters[i]].requires_grad) continue;
    trainable_bytes.push_back(bytes[parameters[i].value]);
    trainable_index.push_back(i);
  }
  if (parallel.ddp_reducer()) layout.ddp_bucket_bytes = DdpBucketBytes(trainable_bytes);
  if (parallel.sharding == Sharding::kZero1) {
    std::vector<int64_t> numels;
    for (size_t i : trainable_index) numels.push_back(graph.tensor(parameters[i]).shape.Numel({}));
    const std::vector<int64_t> rank_of = PartitionLikeZeroRedundancy(numels, parallel.gpus);
    // The busiest rank: the most optimizer-state elements (the lowest on a tie).
    std::vector<int64_t> load(parallel.gpus, 0);
    for (size_t k = 0; k < numels.size(); ++k) load[rank_of[k]] += numels[k];
    layout.rank = parallel.rank.value_or(std::max_element(load.begin(), load.end()) - load.begin());
    for (size_t k = 0; k < trainable_index.size(); ++k)
      layout.owns_optimizer_state[trainable_index[k]] = rank_of[k] == layout.rank;
  }
  if (parallel.sharding == Sharding::kZero2)
    LayoutZero2(graph, parameters, bytes, trainable_index, parallel, layout);
  if (parallel.sharding == Sharding::kZero3) {
    // Every rank holds the same sizes (the last one's padding aside); rank 0 is replayed.
    layout.rank = parallel.rank.value_or(0);
    layout.zero3 = LayoutZero3(graph, states, parameters, bytes, parallel);
    std::fill(layout.owns_optimizer_state.begin(), layout.owns_optimizer_state.end(), 0);
  }
  return layout;
}

}  // namespace headroom
