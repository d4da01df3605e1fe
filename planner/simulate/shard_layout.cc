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

ShardLayout LayoutShards(const OpGraph& graph, const TensorStates& states,
                         const std::vector<TensorId>& parameters,
                         const std::vector<int64_t>& bytes, const Parallelism& parallel) {
  ShardLayout layout;
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
    layout.rank = std::max_element(load.begin(), load.end()) - load.begin();
    for (size_t k = 0; k < trainable_index.size(); ++k)
      layout.owns_optimizer_state[trainable_index[k]] = rank_of[k] == layout.rank;
  }
  return layout;
}

}  // namespace headroom
