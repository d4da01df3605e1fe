// What a Python object among the checkpointed blocks' arguments keeps alive
// (BlockSegment::kept_by_arguments: Gemma 4's attention stores its K/V in
// shared_kv_states, a dict every decoder layer receives).
//
// torch.utils.checkpoint (non-reentrant, torch/utils/checkpoint.py,
// _checkpoint_without_reentrant_generator) keeps each checkpointed block's arguments for
// its recomputation: transformers' GradientCheckpointingLayer checkpoints
// partial(forward, **kwargs) (modeling_layers.py), so the dict lives until the last
// checkpointed block's frame is freed, after that block's backward. Meanwhile:
//  - a tensor the first forward wrote there stays alive until the block's recomputation
//    writes the key again (or, for a block not checkpointed, until the dict goes);
//  - the recomputed tensor written there keeps its autograd graph, and with it the
//    tensors the ops upstream of it saved in the recomputation (the recomputation's pack
//    hook returns the tensor itself), until the dict goes.
// Blocks are taken to write entries of their own: a block overwriting another's would
// free it sooner in the real code, so the plan errs high there. Measured on a real toy
// Gemma 4 (docs/graph-file.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "planner/graph/op_graph.h"

namespace headroom {

class KeptByArguments {
 public:
  // `checkpointed` per block; a reentrant checkpoint (headroom's own stack) runs no
  // imported graph and keeps nothing here.
  KeptByArguments(const OpGraph& graph, const std::vector<uint8_t>& checkpointed, bool reentrant) {
    const auto& blocks = graph.blocks();
    for (size_t b = 0; b < blocks.size(); ++b) {
      if (checkpointed[b] && !reentrant && last_checkpointed_ < 0)
        last_checkpointed_ = static_cast<int>(b);  // the first in the forward: last to go
    }
    if (last_checkpointed_ < 0) return;
    for (size_t b = 0; b < blocks.size(); ++b) {
      const BlockSegment& block = blocks[b];
      if (block.kept_by_arguments.empty()) continue;
      if (!any_) {  // the tables, only for a graph that needs them (the solver's hot path)
        any_ = true;
        made_by_op_.resize(graph.num_ops());
        upstream_.resize(blocks.size());
        last_write_op_.assign(blocks.size(), -1);
      }
      std::vector<uint8_t> upstream(graph.num_ops(), 0);
      std::vector<int> pending;
      for (TensorId t : block.kept_by_arguments) {
        const int op = graph.tensor(t).producer.value;
        made_by_op_[op].push_back(t);
        last_write_op_[b] = std::max(last_write_op_[b], op);
        pending.push_back(op);
      }
      while (!pending.empty()) {
        const int op = pending.back();
        pending.pop_back();
        if (op < block.first_op.value || upstream[op]) continue;
        upstream[op] = 1;
        for (TensorId in : graph.op(OpId{op}).inputs) {
          if (const OpId p = graph.tensor(in).producer; p.valid()) pending.push_back(p.value);
        }
      }
      for (int op = block.first_op.value; op <= block.last_op.value; ++op)
        if (upstream[op]) upstream_[b].push_back(op);
    }
  }

  // Whether any block writes into its arguments while some block is checkpointed; the
  // accessors below hold only then.
  bool any() const { return any_; }
  // The tensors op `op` writes into the arguments.
  const std::vector<TensorId>& MadeBy(int op) const { return made_by_op_[op]; }
  // The ops of `block` whose recomputed saved tensors the written tensors keep.
  const std::vector<int>& Upstream(int block) const { return upstream_[block]; }
  // The op after which `block` has written all it writes (-1: none).
  int LastWriteOp(int block) const { return last_write_op_[block]; }
  // The block whose backward frees the arguments: the first checkpointed one.
  int ArgumentsFreedAfter() const { return last_checkpointed_; }

 private:
  bool any_ = false;
  int last_checkpointed_ = -1;
  std::vector<std::vector<TensorId>> made_by_op_;
  std::vector<std::vector<int>> upstream_;
  std::vector<int> last_write_op_;
};

}  // namespace headroom
