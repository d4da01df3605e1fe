#include "planner/simulate/internal/zero3_replay.h"

#include <algorithm>
#include <map>
#include <utility>

namespace headroom {

Zero3Replay::Zero3Replay(const Zero3Layout& layout, Sizes sizes,
                         std::vector<OptimizerParamCost> sub_group_costs, ReplayMemory memory)
    : layout_(layout),
      sizes_(sizes),
      sub_group_costs_(std::move(sub_group_costs)),
      memory_(std::move(memory)),
      status_(layout.numel.size(), Status::kPartitioned),
      storage_(layout.numel.size(), kNone),
      gather_of_(layout.numel.size(), -1),
      persistent_storage_(layout.numel.size(), kNone),
      fetched_for_(layout.numel.size(), 0),
      in_backward_(layout.modules.size(), 0) {}

void Zero3Replay::Setup() {
  // stage3.py __init__: the fp32 partitions (_create_fp32_partitions, a copy even of fp32
  // weights), grad_partitions_flat_buffer, and the ipg bucket's buffer (IPGBucket),
  // allocated once and kept.
  int64_t partitions = 0;
  for (int64_t n : layout_.sub_group_numel) partitions += n;
  if (partitions == 0) return GatherPersistent();
  memory_.acquire_persistent(partitions * 4, Category::kOptimizer);
  memory_.acquire_persistent(partitions * layout_.grad_element_bytes, Category::kGradients);
  memory_.acquire_persistent(sizes_.reduce_bucket_size * layout_.grad_element_bytes,
                             Category::kGradients);
  GatherPersistent();
}

// mark_persistent_parameters' parameters, gathered after partitioning and after each step
// (_post_step -> all_gather -> _allgather_params_coalesced): one buffer of W padded
// partitions each, the parameter a view of it.
void Zero3Replay::GatherPersistent() {
  std::vector<size_t> gathered;
  for (size_t i = 0; i < layout_.numel.size(); ++i) {
    if (!layout_.persistent[i] || status_[i] != Status::kPartitioned) continue;
    const int64_t bytes = layout_.partition_numel[i] * layout_.world * layout_.element_bytes[i];
    persistent_storage_[i] = memory_.acquire_persistent(bytes, Category::kWeights);
    status_[i] = Status::kAvailable;
    gathered.push_back(i);
  }
  for (size_t i : gathered)
    AllGatherScratch(layout_.partition_numel[i] * layout_.world * layout_.element_bytes[i]);
}

// Gloo's all_gather_into_tensor gathers into a flat tensor of the output's size, then
// copies it out (ProcessGroupGloo allgather); NCCL writes the output in place.
void Zero3Replay::AllGatherScratch(int64_t output_bytes) {
  if (sizes_.gloo) memory_.release(memory_.acquire(output_bytes, Category::kTemporaries));
}

// reset_step (the model's forward pre-hook): what is still in flight is waited for and
// released; the first forward starts recording the trace, the second completes it.
void Zero3Replay::StartForward() {
  for (size_t i = 0; i < gather_of_.size(); ++i) {
    if (gather_of_[i] < 0) continue;
    Wait(i);
    ReleaseParam(i);
  }
  if (recording_) {
    for (size_t k = 0; k < trace_.size(); ++k) {
      if (trace_[k] == kContainer) continue;
      for (size_t p : layout_.modules[trace_[k]].params) queue_.push_back({p, static_cast<int>(k)});
    }
    recording_ = false;
    complete_ = true;
  } else if (!complete_) {
    recording_ = true;
  }
  queue_next_ = 0;
  std::fill(fetched_for_.begin(), fetched_for_.end(), -1'000'000'000);
  step_id_ = 0;
  available_numel_ = 0;
  for (int k = 0; k < layout_.root_containers; ++k) Call(kContainer);
}

void Zero3Replay::StartBackward() {
  for (int k = 0; k < layout_.root_containers; ++k) Call(kContainer);
}

void Zero3Replay::ModuleForward(int module) {
  for (int k = 0; k < layout_.modules[module].containers_before_forward; ++k) Call(kContainer);
  Call(module);
}

// A module's pre-backward hook runs before the backward of the op that made its output;
// its post-backward after the backward of its first op, when its input needs a gradient.
void Zero3Replay::BeforeOpBackward(int op) {
  const int module = layout_.module_ending[op];
  if (module < 0 || !layout_.modules[module].in_backward) return;
  for (int k = 0; k < layout_.modules[module].containers_before_backward; ++k) Call(kContainer);
  Call(module);
  in_backward_[module] = 1;
  if (!layout_.modules[module].post_backward) awaiting_post_backward_.push_back(module);
}

void Zero3Replay::AfterOpBackward(int op) {
  const int module = layout_.module_starting[op];
  if (module < 0) return;
  const Zero3Module& m = layout_.modules[module];
  if (!m.in_backward || !m.post_backward) return;
  in_backward_[module] = 0;
  ReleaseModule(module);
}

// fetch_sub_module: gather what is partitioned, wait for what is in flight; with a
// complete trace, step past this call's uses in the queue and prefetch.
void Zero3Replay::Call(int module) {
  if (recording_) trace_.push_back(module);
  static const std::vector<size_t> kNoParams;
  const std::vector<size_t>& params = module >= 0 ? layout_.modules[module].params : kNoParams;
  std::vector<size_t> to_fetch;
  for (size_t p : params)
    if (status_[p] == Status::kPartitioned) to_fetch.push_back(p);
  if (!to_fetch.empty()) StartGather(std::move(to_fetch));
  for (size_t p : params)
    if (gather_of_[p] >= 0) Wait(p);
  if (complete_) {
    size_t not_yet_fetched = 0;
    for (size_t p : params) not_yet_fetched += fetched_for_[p] < step_id_;
    for (; not_yet_fetched > 0 && queue_next_ < queue_.size(); --not_yet_fetched) {
      const QueuedUse& use = queue_[queue_next_++];
      fetched_for_[use.param] = use.step;
    }
    Prefetch();
  }
  ++step_id_;
}

// The next uses in the queue, up to prefetch_bucket_size elements (and no more than
// max_live_parameters gathered), one coalesced gather of those still partitioned.
void Zero3Replay::Prefetch() {
  const int64_t budget =
      std::min(sizes_.max_live_parameters - available_numel_, sizes_.prefetch_bucket_size);
  std::vector<size_t> prefetch;
  int64_t numel = 0;
  while (queue_next_ < queue_.size() && numel < budget) {
    const QueuedUse& use = queue_[queue_next_++];
    fetched_for_[use.param] = std::max(fetched_for_[use.param], use.step);
    if (status_[use.param] != Status::kPartitioned ||
        std::find(prefetch.begin(), prefetch.end(), use.param) != prefetch.end())
      continue;
    prefetch.push_back(use.param);
    numel += layout_.numel[use.param];
  }
  if (!prefetch.empty()) StartGather(std::move(prefetch));
}

// all_gather_coalesced: one parameter alone (_all_gather_sequential) gathers into a buffer
// of W padded partitions that becomes the parameter; several (_all_gather_dtype) into one
// flat buffer per dtype, each parameter copied out of it at the first wait (torch.cat),
// the buffer freed once every parameter of the handle has been waited for.
void Zero3Replay::StartGather(std::vector<size_t> params) {
  std::sort(params.begin(), params.end());  // by ds_id
  Gather gather{.params = params, .unwaited = static_cast<int>(params.size())};
  for (size_t p : params) available_numel_ += layout_.numel[p];
  if (params.size() == 1) {
    const size_t p = params.front();
    const int64_t bytes = layout_.partition_numel[p] * layout_.world * layout_.element_bytes[p];
    storage_[p] = memory_.acquire(bytes, Category::kWeights);
    AllGatherScratch(bytes);
    gather.waited = true;
  } else {
    std::map<int64_t, int64_t> partition_bytes_by_dtype;
    for (size_t p : params)
      partition_bytes_by_dtype[layout_.element_bytes[p]] +=
          layout_.partition_numel[p] * layout_.element_bytes[p];
    for (const auto& [element, bytes] : partition_bytes_by_dtype) {
      gather.flats.push_back(memory_.acquire(bytes * layout_.world, Category::kWeights));
      AllGatherScratch(bytes * layout_.world);
    }
  }
  for (size_t p : params) {
    status_[p] = Status::kInflight;
    gather_of_[p] = static_cast<int>(gathers_.size());
  }
  gathers_.push_back(std::move(gather));
}

void Zero3Replay::Wait(size_t param) {
  Gather& gather = gathers_[gather_of_[param]];
  gather_of_[param] = -1;
  if (!gather.waited) {
    for (size_t p : gather.params) {
      storage_[p] =
          memory_.acquire(layout_.numel[p] * layout_.element_bytes[p], Category::kWeights);
      status_[p] = Status::kAvailable;
    }
    gather.waited = true;
  }
  status_[param] = Status::kAvailable;
  if (--gather.unwaited == 0) {
    for (int64_t flat : gather.flats) memory_.release(flat);
    gather.flats.clear();
  }
}

// release_sub_module: with a complete trace, the parameters that are not persistent, not
// prefetched for a later call, and not used again within max_reuse_distance elements of
// the calls ahead (__params_to_release); while recording, all of them.
void Zero3Replay::ReleaseModule(int module) {
  // A checkpointed block's recomputation runs after the pre-backward hooks of the modules
  // whose backward asked for it: those keep what they gathered until their own
  // post-backward hook (measured on DeepSpeed 0.19.8 with non-reentrant checkpointing).
  if (in_backward_[module]) return;
  std::vector<size_t> release = layout_.modules[module].params;
  if (complete_) {
    std::erase_if(release,
                  [&](size_t p) { return layout_.persistent[p] || fetched_for_[p] > step_id_; });
    int64_t traversed = 0;
    for (size_t k = step_id_; k < trace_.size() && !release.empty(); ++k) {
      if (traversed >= sizes_.max_reuse_distance) break;
      if (trace_[k] == kContainer) continue;
      for (size_t q : layout_.modules[trace_[k]].params) {
        std::erase(release, q);
        traversed += layout_.numel[q];
      }
    }
  }
  for (size_t p : release) ReleaseParam(p);
}

void Zero3Replay::ReleaseParam(size_t param) {
  if (status_[param] != Status::kAvailable) return;
  if (persistent_storage_[param] != kNone) {
    memory_.release_persistent(persistent_storage_[param]);
    persistent_storage_[param] = kNone;
  } else {
    memory_.release(storage_[param]);
  }
  storage_[param] = kNone;
  status_[param] = Status::kPartitioned;
  available_numel_ -= layout_.numel[param];
}

// The contiguous bucket: a gradient that would overflow it sends the bucket off first;
// one that fits is copied in and its own tensor freed; one larger than the bucket stays.
void Zero3Replay::GradientReady(size_t i, int64_t grad) {
  const int64_t numel = layout_.numel[i];
  if (bucket_numel_ + numel > sizes_.reduce_bucket_size && bucket_numel_ > 0) Reduce();
  if (bucket_numel_ + numel <= sizes_.reduce_bucket_size) {
    memory_.release(grad);
  } else {
    own_grads_.push_back(grad);
  }
  bucket_params_.push_back(i);
  bucket_numel_ += numel;
}

// __reduce_and_partition_ipg_grads -> __avg_scatter_grads -> reduce_scatter_coalesced:
// every gradient cut in W chunks of c elements, the short chunks padded with fresh
// tensors, all concatenated rank by rank into one flat tensor (unless it is a single
// gradient that divides by W), reduce-scattered; partition_grads copies this rank's
// chunks into grad_partitions_flat_buffer and drops the gradients.
void Zero3Replay::Reduce() {
  if (bucket_params_.empty()) return;
  int64_t flat_numel = 0, padding_numel = 0;
  for (size_t p : bucket_params_) {
    flat_numel += layout_.partition_numel[p] * layout_.world;
    padding_numel += layout_.partition_numel[p] * layout_.world - layout_.numel[p];
  }
  const int64_t element = layout_.grad_element_bytes;
  const bool in_place = bucket_params_.size() == 1 && padding_numel == 0;
  const int64_t padding =
      padding_numel > 0 ? memory_.acquire(padding_numel * element, Category::kTemporaries) : kNone;
  const int64_t flat =
      in_place ? kNone : memory_.acquire(flat_numel * element, Category::kTemporaries);
  // Gloo's reduce_scatter_tensor reduces a clone of its input.
  if (sizes_.gloo) memory_.release(memory_.acquire(flat_numel * element, Category::kTemporaries));
  for (int64_t grad : own_grads_) memory_.release(grad);
  if (padding != kNone) memory_.release(padding);
  if (flat != kNone) memory_.release(flat);
  own_grads_.clear();
  bucket_params_.clear();
  bucket_numel_ = 0;
}

void Zero3Replay::EndBackward() {
  Reduce();
  for (int module : awaiting_post_backward_) {
    in_backward_[module] = 0;
    for (size_t p : layout_.modules[module].params)
      if (!layout_.persistent[p]) ReleaseParam(p);
  }
  awaiting_post_backward_.clear();
}

// step(): every parameter released (_partition_all_parameters, the persistent ones too);
// the gradient norm over each partition in float64 (get_grad_norm_direct); per
// sub-group, its gradients flattened into one fp32 tensor (_prepare_fp32_grad_for_sub_group)
// and the optimizer run over the fp32 partition; then the persistent parameters gathered
// again (_post_step).
void Zero3Replay::OptimizerStep(int step) {
  for (size_t p = 0; p < layout_.numel.size(); ++p) {
    if (gather_of_[p] >= 0) Wait(p);
    ReleaseParam(p);
  }
  for (size_t p = 0; p < layout_.numel.size(); ++p)
    if (layout_.trainable[p])
      memory_.release(memory_.acquire(layout_.partition_numel[p] * 8, Category::kTemporaries));
  for (size_t k = 0; k < layout_.sub_group_numel.size(); ++k) {
    const int64_t numel = layout_.sub_group_numel[k];
    int64_t grad = memory_.acquire(numel * layout_.grad_element_bytes, Category::kGradients);
    if (layout_.grad_element_bytes != 4) {
      const int64_t fp32 = memory_.acquire(numel * 4, Category::kGradients);
      memory_.release(grad);
      grad = fp32;
    }
    StepOverFlatTensor(memory_, sub_group_costs_[k], step);
    memory_.release(grad);
  }
  GatherPersistent();
}

}  // namespace headroom
