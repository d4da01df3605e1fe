// FSDP2's buffers over one training step of one rank (torch/distributed/fsdp/
// _fully_shard): what each unit gathers, keeps, prefetches and reduce-scatters, and
// when. The step simulator calls the hooks at the points FSDP2 runs them; buffers are
// taken and given back through its accounting (`Memory`), so they show in its timeline.
// Units are in forward order (shard_layout.h), the root last: the root's default
// reshard_after_forward=None keeps it unsharded from its forward to the end of the
// backward; each other unit reshards after its forward as its flag says.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>
#include <functional>
#include <vector>

#include "planner/simulate/internal/replay_memory.h"
#include "planner/simulate/memory_category.h"
#include "planner/simulate/shard_layout.h"

namespace headroom {

class FsdpReplay {
 public:
  // `gloo_scratch`: the CPU's gloo copies the all-gather output and clones the
  // reduce-scatter input for the collective (NCCL does neither).
  // `offload`: CPUOffloadPolicy, the shards (and their gradients) kept in CPU RAM.
  FsdpReplay(const ShardLayout& layout, bool gloo_scratch, bool offload, ReplayMemory memory);

  int root() const { return static_cast<int>(units_.size()) - 1; }
  // Around op o, the hooks of the unit whose ops begin or end there (none for most):
  // before its forward, the unit's pre-forward; after it, the post-forward; before its
  // backward, the pre-backward; after it, the post-backward.
  void BeforeOpForward(int op) {
    if (starting_[op] >= 0) GatherForward(starting_[op]);
  }
  void AfterOpForward(int op) {
    if (ending_[op] >= 0) AfterForward(ending_[op]);
  }
  void BeforeOpBackward(int op) {
    if (ending_[op] >= 0) PreBackward(ending_[op]);
  }
  void AfterOpBackward(int op) {
    if (starting_[op] >= 0) AfterUnitBackward(starting_[op]);
  }
  // Forward pre-hook: gather; the previous unit's flat output, kept for reuse, goes
  // once this one's collective is done (release_all_gather_state_for_comm_reuse), and
  // this one's is kept in turn.
  void GatherForward(int unit);
  // Forward post-hook: reshard when the unit's reshard_after_forward says so.
  void AfterForward(int unit);
  // The root's post-forward lets the last kept all-gather output go.
  void EndForward();
  // Backward pre-hook: copy out of the prefetched output (gathered now if it was not)
  // and free it at once, then prefetch the unit that ran just before (the root, first
  // in backward, prefetches the last block).
  void PreBackward(int unit);
  // Post-backward hook of a unit whose input needs a gradient (the others wait for
  // EndBackward).
  void AfterUnitBackward(int unit);
  // The final callback: units whose inputs needed no gradient (the root first), then
  // the last reduce-scatter input.
  void EndBackward();
  // zero_grad(set_to_none=True): one reduce-scatter output per unit.
  void ZeroGrad();

 private:
  static constexpr int64_t kNone = -1;
  int64_t AllGather(int unit);
  void CopyOut(int unit);
  void Reshard(int unit);
  void PostBackward(int unit);

  const std::vector<FsdpUnit>& units_;
  const std::vector<int>& starting_;  // per op, from the layout
  const std::vector<int>& ending_;
  const bool gloo_scratch_;
  const bool offload_;
  ReplayMemory memory_;
  // Per unit: its gathered parameters (empty while sharded), the all-gather output
  // prefetched for its backward, its sharded gradient, whether its post-backward ran.
  std::vector<std::vector<int64_t>> unsharded_;
  std::vector<int64_t> prefetched_flat_;
  std::vector<int64_t> sharded_grad_;
  std::vector<uint8_t> post_backward_done_;
  int64_t retained_flat_ = kNone;      // the forward's last all-gather output
  int64_t held_reduce_input_ = kNone;  // kept until the next reduce-scatter starts
};

}  // namespace headroom
