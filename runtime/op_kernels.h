// The executor's entry for each op kind in the op table (planner/graph/op_kinds.h): the
// LibTorch calls that run it, as the real stack writes them. Every attribute comes from
// the graph node and its tensors' shapes, never from the model spec.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/Tensor.h>

#include "planner/graph/op_graph.h"

namespace headroom {

struct KernelCall {
  const OpGraph& graph;
  const OpNode& op;
  const std::vector<at::Tensor>& in;  // after the executor's dtype casts
  int64_t micro_batch = 1;
  int64_t seq_len = 1;

  // The concrete sizes of output k at this micro-batch and sequence length.
  std::vector<int64_t> out_sizes(size_t k = 0) const;
};

// Runs `call.op` and returns its outputs, one per graph output.
std::vector<at::Tensor> RunKernel(const KernelCall& call);

}  // namespace headroom
