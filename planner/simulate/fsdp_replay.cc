#include "planner/simulate/internal/fsdp_replay.h"

#include <algorithm>
#include <utility>

namespace headroom {

FsdpReplay::FsdpReplay(const ShardLayout& layout, bool gloo_scratch, bool offload,
                       ReplayMemory memory)
    : units_(layout.fsdp_units),
      starting_(layout.fsdp_unit_starting),
      ending_(layout.fsdp_unit_ending),
      gloo_scratch_(gloo_scratch),
      offload_(offload),
      memory_(std::move(memory)),
      unsharded_(units_.size()),
      prefetched_flat_(units_.size(), kNone),
      sharded_grad_(units_.size(), kNone),
      post_backward_done_(units_.size(), 0) {}

// The all-gather's flat output, and gloo's scratch copy of it for the collective. Offloaded
// shards are first copied to the device (_fsdp_param.py all_gather_inputs, .to(device)),
// those copies freed once copied in. Under a MixedPrecisionPolicy the shards are first
// cast into one flat param_dtype tensor (_fsdp_collectives.py _get_param_all_gather_inputs),
// held until foreach_all_gather returns, after the (synchronous) collective.
int64_t FsdpReplay::AllGather(int unit) {
  const int64_t bytes = units_[unit].flat_bytes;
  const int64_t world = units_[unit].world;
  const int64_t inputs =
      offload_ && world > 0 ? memory_.acquire(bytes / world, Category::kTemporaries) : kNone;
  const int64_t cast = units_[unit].gather_cast_bytes > 0
                           ? memory_.acquire(units_[unit].gather_cast_bytes, Category::kWeightCasts)
                           : kNone;
  const int64_t flat = memory_.acquire(bytes, Category::kTemporaries);
  if (inputs != kNone) memory_.release(inputs);
  if (gloo_scratch_) memory_.release(memory_.acquire(bytes, Category::kTemporaries));
  if (cast != kNone) memory_.release(cast);
  return flat;
}

// Copy-out: one unsharded tensor per parameter (padded rows included), the module's
// parameter a view of it (_fsdp_param.py init_all_gather_outputs, alloc_all_gather_outputs).
void FsdpReplay::CopyOut(int unit) {
  for (int64_t bytes : units_[unit].unsharded_bytes)
    unsharded_[unit].push_back(memory_.acquire(bytes, Category::kWeights));
}

void FsdpReplay::Reshard(int unit) {
  for (int64_t b : unsharded_[unit]) memory_.release(b);
  unsharded_[unit].clear();
}

void FsdpReplay::GatherForward(int unit) {
  if (!unsharded_[unit].empty() || units_[unit].params.empty()) return;
  const int64_t flat = AllGather(unit);
  if (retained_flat_ != kNone) memory_.release(retained_flat_);
  CopyOut(unit);
  retained_flat_ = flat;
}

void FsdpReplay::AfterForward(int unit) {
  if (units_[unit].reshard_after_forward) Reshard(unit);
}

void FsdpReplay::EndForward() {
  if (retained_flat_ != kNone) memory_.release(retained_flat_);
  retained_flat_ = kNone;
}

void FsdpReplay::PreBackward(int unit) {
  if (units_[unit].params.empty()) return;  // no parameter group: no hooks
  if (unsharded_[unit].empty()) {
    const int64_t flat = prefetched_flat_[unit] != kNone ? prefetched_flat_[unit] : AllGather(unit);
    prefetched_flat_[unit] = kNone;
    CopyOut(unit);
    memory_.release(flat);
  }
  const int previous = unit == root() ? root() - 1 : unit - 1;
  if (previous >= 0 && unsharded_[previous].empty() && prefetched_flat_[previous] == kNone)
    prefetched_flat_[previous] = AllGather(previous);
}

void FsdpReplay::AfterUnitBackward(int unit) {
  if (!units_[unit].deferred_post_backward) PostBackward(unit);
}

// Reshard, let the previous reduce-scatter input go, pack the gradients into this one's
// input and free them, reduce-scatter (gloo all-reduces a clone of the input) into the
// sharded gradient (_fsdp_collectives.py foreach_reduce).
void FsdpReplay::PostBackward(int unit) {
  post_backward_done_[unit] = 1;
  if (units_[unit].params.empty()) return;  // no parameter group: no hooks
  Reshard(unit);
  if (held_reduce_input_ != kNone) memory_.release(held_reduce_input_);
  held_reduce_input_ = kNone;
  const FsdpUnit& u = units_[unit];
  if (!u.trainable) return;
  const int64_t input = memory_.acquire(u.reduce_input_bytes, Category::kTemporaries);
  for (int64_t pad : u.pad_copy_bytes)
    memory_.release(memory_.acquire(pad, Category::kTemporaries));
  for (size_t i : u.params) memory_.drop_grad(i);
  int64_t output = memory_.acquire(u.reduce_output_bytes, Category::kGradients);
  if (gloo_scratch_) memory_.release(memory_.acquire(u.reduce_input_bytes, Category::kTemporaries));
  if (u.sharded_grad_cast_bytes > 0) {
    // reduce_dtype is not the shards': the output is cast back to it, and the cast is
    // what the sharded .grad views (_fsdp_collectives.py _cast_and_view_sharded_grads).
    const int64_t cast = memory_.acquire(u.sharded_grad_cast_bytes, Category::kGradients);
    memory_.release(output);
    output = cast;
  }
  if (offload_) {
    // foreach_reduce moves the sharded gradient to the CPU (.to("cpu")); the device copy
    // goes with the reduce-scatter output.
    memory_.release(output);
  } else if (sharded_grad_[unit] == kNone) {
    sharded_grad_[unit] = output;
  } else {
    memory_.release(output);  // accumulated into the sharded .grad
  }
  held_reduce_input_ = input;
}

void FsdpReplay::EndBackward() {
  PostBackward(root());
  for (int u = 0; u < root(); ++u)
    if (!post_backward_done_[u]) PostBackward(u);
  if (held_reduce_input_ != kNone) memory_.release(held_reduce_input_);
  held_reduce_input_ = kNone;
  std::fill(post_backward_done_.begin(), post_backward_done_.end(), 0);
}

void FsdpReplay::ZeroGrad() {
  for (int64_t& g : sharded_grad_) {
    if (g != kNone) memory_.release(g);
    g = kNone;
  }
}

}  // namespace headroom
