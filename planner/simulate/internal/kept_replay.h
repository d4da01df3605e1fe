// The buffers the checkpointed blocks' arguments keep, replayed into the step simulator's
// ledger (which ones: kept_by_arguments.h): what the first forward wrote there until the
// block's recomputation writes it again, and what the recomputations wrote, with the
// saved tensors of the ops upstream of it, until the arguments are freed.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "planner/simulate/internal/buffer_ledger.h"
#include "planner/simulate/internal/hold_lists.h"
#include "planner/simulate/internal/kept_by_arguments.h"

namespace headroom {

class KeptReplay {
 public:
  KeptReplay(const KeptByArguments& kept, size_t blocks, BufferLedger& ledger)
      : kept_(kept), originals_(blocks), ledger_(ledger) {}

  // `out` of op `op` (in `block`) is bound to `buffer`: kept if the op writes it into the
  // arguments, by the first forward or a recomputation.
  void OutputMade(int op, int block, TensorId out, int64_t buffer, bool recomputed) {
    const auto& written = kept_.MadeBy(op);
    if (std::find(written.begin(), written.end(), out) == written.end()) return;
    ledger_.Retain(buffer);
    (recomputed ? recomputed_ : originals_[block]).push_back(buffer);
  }

  // What the block's ops upstream of its recomputed writes saved stays with their graph.
  void KeepRecomputedGraph(int block, const HoldLists& op_holds) {
    for (int op : kept_.Upstream(block)) {
      op_holds.ForEach(op, [this](int64_t b) {
        ledger_.Retain(b);
        recomputed_.push_back(b);
      });
    }
  }

  // The recomputation wrote the block's entries again: the first forward's go.
  void ReleaseOriginals(int block) { Release(originals_[block]); }

  // The arguments are freed: everything kept goes.
  void ReleaseAll() {
    Release(recomputed_);
    for (auto& originals : originals_) Release(originals);
  }

 private:
  void Release(std::vector<int64_t>& buffers) {
    for (int64_t b : buffers) ledger_.Release(b);
    buffers.clear();
  }

  const KeptByArguments& kept_;
  std::vector<std::vector<int64_t>> originals_;  // per block
  std::vector<int64_t> recomputed_;
  BufferLedger& ledger_;
};

}  // namespace headroom
