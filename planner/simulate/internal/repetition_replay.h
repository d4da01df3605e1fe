// The step simulator's replay of a rolled loop's repetitions held once (RepeatedOps):
// the graph runs a loop's middle iteration twice, the first standing for `times` of them.
// Every repetition allocates the same buffers, so what one leaves live for later (what
// autograd saved, what Python holds to the forward's end) is what the first repetition
// made and still holds once the second has run. The `times - 1` repetitions before it
// would have left as much again: copies of those buffers, inserted where the first
// repetition starts, make the live bytes of the two that run those of the loop's last
// two. In the backward, the repetitions run in reverse and each frees what it left: the
// copies go once the first repetition's backward has run, its other repetitions' backward
// holding less than it does. A copy's original freed elsewhere (Python's hold to the
// forward's end) takes its copies with it. Private to planner/simulate/.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/simulate/internal/buffer_ledger.h"

namespace headroom {

class RepetitionReplay {
 public:
  RepetitionReplay(const OpGraph& graph, BufferLedger& ledger)
      : groups_(graph.repeated()), ledger_(ledger), group_of_op_(graph.num_ops(), -1) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      const RepeatedOps& r = groups_[g];
      for (int o = r.first_op.value; o < r.first_op.value + 2 * r.ops; ++o)
        group_of_op_[o] = static_cast<int>(g);
    }
    marks_.resize(groups_.size());
    deferred_.resize(groups_.size());
  }

  // Before op `o` runs forward (a first forward or a recomputation); its phase will have
  // index `phase`.
  void BeforeForward(int o, int32_t phase) {
    if (groups_.empty()) return;
    const int g = group_of_op_[o];
    if (g < 0 || groups_[g].first_op.value != o) return;
    marks_[g] = {.at = ledger_.next_event(), .phase = phase, .first_buffer = ledger_.next_buffer()};
  }

  // After op `o`'s forward and what was released after it.
  void AfterForward(int o) {
    if (groups_.empty()) return;
    ReleaseCopies(-1);
    const int g = group_of_op_[o];
    if (g < 0) return;
    const RepeatedOps& r = groups_[g];
    Mark& mark = marks_[g];
    if (o == r.first_op.value + r.ops - 1) mark.end_buffer = ledger_.next_buffer();
    if (o != r.first_op.value + 2 * r.ops - 1) return;
    for (int64_t id = mark.first_buffer; id < mark.end_buffer; ++id) {
      if (ledger_.refs(id) == 0) continue;
      ledger_.Watch(id);
      Copies& copies = copies_[id];
      copies.group = g;
      copies.buffers.reserve(r.times - 1);
      for (int64_t k = 1; k < r.times; ++k)
        copies.buffers.push_back(ledger_.AcquireCopyAt(id, mark.at, mark.phase));
    }
  }

  // After op `o`'s backward.
  void AfterBackward(int o) {
    if (groups_.empty()) return;
    ReleaseCopies(o);
    const int g = group_of_op_[o];
    if (g < 0 || groups_[g].first_op.value != o) return;
    for (int64_t id : deferred_[g]) ReleaseCopiesOf(id);
    deferred_[g].clear();
  }

  // The copies of originals freed since the last call: with their group's backward when
  // it is running (`backward_op` one of its ops), else now.
  void ReleaseCopies(int backward_op) {
    std::vector<int64_t>& freed = ledger_.freed_watched();
    if (freed.empty()) return;
    for (int64_t id : freed) {
      const int g = copies_.at(id).group;
      if (backward_op >= 0 && group_of_op_[backward_op] == g) {
        deferred_[g].push_back(id);
      } else {
        ReleaseCopiesOf(id);
      }
    }
    freed.clear();
  }

 private:
  struct Mark {
    size_t at = 0;             // the timeline's event index where the first repetition starts
    int32_t phase = 0;         // its first op's phase
    int64_t first_buffer = 0;  // the buffers it acquired: [first_buffer, end_buffer)
    int64_t end_buffer = 0;
  };

  // An original's copies: what its group's `times - 1` other repetitions left.
  struct Copies {
    int group = -1;
    std::vector<int64_t> buffers;
  };

  void ReleaseCopiesOf(int64_t id) {
    auto it = copies_.find(id);
    for (int64_t copy : it->second.buffers) ledger_.Release(copy);
    copies_.erase(it);
  }

  const std::vector<RepeatedOps>& groups_;
  BufferLedger& ledger_;
  std::vector<int> group_of_op_;                // the group whose two repetitions hold op o, or -1
  std::vector<Mark> marks_;                     // per group, its latest pass
  std::vector<std::vector<int64_t>> deferred_;  // per group: originals freed in its backward
  std::unordered_map<int64_t, Copies> copies_;  // by original
};

}  // namespace headroom
