// The cost rule of each op kind under a precision regime: what its forward allocates
// besides its outputs, what it saves for backward, what its backward allocates, its
// transient workspace, and its FLOPs. The rules describe PyTorch eager (the ATen
// kernels and autograd formulas the executor calls); docs/memory-model.md lists them.
// Each op kind has its CostRule<K> in op_cost.cc or internal/moe_cost_rules.h (see
// planner/graph/op_kinds.h).
#pragma once

#include "planner/simulate/layer.h"

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/simulate/chunked_loss.h"
#include "planner/simulate/onednn_scratch.h"
#include "planner/simulate/tensor_states.h"

namespace headroom {

// A buffer an op allocates besides its outputs: a dropout mask, norm statistics, an
// fp32 upcast, an autocast copy of an input.
struct InternalBuffer {
  enum class Lifetime {
    kEphemeral,  // freed right after it is allocated and consumed (before the next one)
    kTransient,  // freed when the op finishes
    kSaved,      // saved for backward: freed after the op's backward
  };
  const char* label = "";  // for people reading a timeline
  int64_t bytes = 0;
  Lifetime lifetime = Lifetime::kTransient;
  int cast_of_input = -1;    // >= 0: autocast's copy of that input
  bool weight_copy = false;  // a copy of a weight (QLoRA dequantization)
  bool per_sample = true;    // proportional to the micro-batch (weight copies are not)
};

struct ForwardCost {
  std::vector<bool> saves_input;  // per input: the (possibly cast) value is saved for backward
  std::vector<InternalBuffer> internals;
  bool output_aliases_input = false;  // views, and casts that are no-ops
  uint32_t saved_outputs = 0;         // bit i: output i is saved for backward
  bool saves_output() const { return saved_outputs != 0; }
  int64_t workspace_bytes = 0;  // transient, allocated alongside the outputs
  BrgemmProduct brgemm;         // oneDNN's brgemm product: its scratchpad beside them
  // TRL's fused LM head (kChunkedNll): its tiles, sized at the micro-batch that runs.
  ChunkedLossCall chunked_loss;
};

enum class GradFlow {
  kNone,         // no gradient for this input
  kNew,          // a new tensor the size of the input as used
  kPassThrough,  // the output's gradient itself (add, view): no allocation
};

struct BackwardCost {
  std::vector<GradFlow> input_grads;  // per input, activations and parameters alike
  int64_t workspace_bytes = 0;        // transient during the op's backward
  bool workspace_per_sample = true;   // false for a dequantized weight
  // Held beside workspace_bytes, never scaled with the micro-batch: the part of a traced
  // op's recorded workspace that does not grow with b.
  int64_t workspace_fixed_bytes = 0;
  // Transient while the input's gradient product (dY @ W) runs: after the input
  // gradient exists and before any parameter gradient does (autograd's formulas for
  // mm/addmm compute the input's gradient first). Scales with the micro-batch.
  int64_t input_grad_scratch_bytes = 0;
  // Transient while the weight's (input 1's) gradient product runs, beside that fresh
  // gradient before it is summed into .grad (the fp32 scratch of an emulated bf16
  // product). Does not scale with the micro-batch.
  int64_t weight_grad_scratch_bytes = 0;
  // oneDNN's brgemm products (AVX512-BF16, AMX), whose scratchpads sit where the two above do.
  BrgemmProduct input_grad_brgemm, weight_grad_brgemm;
  ChunkedLossCall chunked_loss;  // kChunkedNll, as in ForwardCost
};

struct OpFlops {
  double forward = 0;
  double backward = 0;  // only the gradients actually needed
};

// `grad_mode` is false inside a checkpointed block's first forward (torch.no_grad).
ForwardCost CostForward(const OpGraph& graph, const OpNode& op, const TensorStates& states,
                        const ShapeEnv& env, bool grad_mode);
BackwardCost CostBackward(const OpGraph& graph, const OpNode& op, const TensorStates& states,
                          const ShapeEnv& env);
OpFlops CostFlops(const OpGraph& graph, const OpNode& op, const TensorStates& states,
                  const ShapeEnv& env);

}  // namespace headroom
