// The executor's entry for each op kind in the op table (planner/graph/op_kinds.h): the
// LibTorch calls that run it, as the real stack writes them. Every attribute comes from
// the graph node and its tensors' shapes, never from the model spec.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/Tensor.h>

#include "planner/graph/op_graph.h"

namespace headroom {

// The routing a mixture of experts actually saw: per expert-sort call, the tokens the
// most-loaded expert received against the balanced share (pairs / experts). Kept as
// 0-dim tensors on the routing's device, so that a layer adds no device sync.
struct ExpertLoad {
  int64_t calls = 0;
  at::Tensor max_over_balanced;  // the largest ratio seen
  at::Tensor sum_over_balanced;  // for the mean ratio
  double worst_case_ratio = 0;   // experts / top_k: every token to the same k experts
  void Record(const at::Tensor& ratio, double worst_case);
};

// ExpertLoad read back once, for the run report.
struct RoutingSeen {
  int64_t calls = 0;
  double max_over_balanced = 0;
  double mean_over_balanced = 0;
  double worst_case_ratio = 0;
};
RoutingSeen Summarize(const ExpertLoad& load);

struct KernelCall {
  const OpGraph& graph;
  const OpNode& op;
  const std::vector<at::Tensor>& in;  // after the executor's dtype casts
  int64_t micro_batch = 1;
  int64_t seq_len = 1;
  ExpertLoad* expert_load = nullptr;  // kExpertSort records what it routed here

  // The concrete sizes of output k at this micro-batch and sequence length.
  std::vector<int64_t> out_sizes(size_t k = 0) const;
};

// Runs `call.op` and returns its outputs, one per graph output.
std::vector<at::Tensor> RunKernel(const KernelCall& call);

}  // namespace headroom
