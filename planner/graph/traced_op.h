// An op recorded by `headroom import` (docs/graph-file.md): one ATen op as transformers'
// code ran it on fake tensors, with what autograd saved for it, the gradients its backward
// made, its backward's workspace and its FLOPs, each symbolic in the micro-batch b and the
// sequence length s. The `traced` cost rule reads these instead of deriving them.
#pragma once

#include "planner/graph/layer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/graph/op_kinds.h"
#include "planner/graph/sym_shape.h"

namespace headroom {

// c * b^b_pow * x^s_pow, with b_pow in {0, 1} and s_pow in {0, 1, 2}; x is s, or s padded to
// whole chunks or their number (`seq`: a sequence split into chunks, Mamba-2's).
struct Monomial {
  double c = 0;
  int b_pow = 0;
  int s_pow = 0;
  Dim seq = Dim::S();
  bool operator==(const Monomial&) const = default;
};

// A sum of monomials: bytes, or FLOPs.
struct SymSize {
  std::vector<Monomial> terms;

  double Evaluate(const ShapeEnv& env) const;
  // Whole bytes (rounded up); throws SizeOverflow past 2^62.
  int64_t Bytes(const ShapeEnv& env) const;
  // The terms proportional to the micro-batch, and the others: the simulator scales the
  // first with the micro-batch and holds the second once.
  SymSize PerSample() const;
  SymSize Fixed() const;
  bool empty() const { return terms.empty(); }
  bool operator==(const SymSize&) const = default;
};

// What an input's gradient is in the recorded backward (GradFlow in the simulator).
enum class TracedGrad {
  kNone,  // no gradient
  kNew,   // the backward allocates it
  kPass,  // the output's gradient itself
};

// The heads of a fused attention kernel's call (q [b, heads, s, head_dim], k and v
// [b, kv_heads, s, head_dim]): its rule sizes the scratch the kernel allocates inside.
struct AttentionHeads {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  bool operator==(const AttentionHeads&) const = default;
};

struct TracedOp {
  std::string aten;    // the ATen op, e.g. "mm"
  std::string module;  // the module that ran it, relative to its layer in a template
  OpClass op_class = OpClass::kElementwise;
  bool aliases_input = false;        // the outputs share input 0's storage
  std::vector<bool> saves_input;     // per input: saved for the backward
  uint32_t saved_outputs = 0;        // bit i: output i is saved for the backward
  std::vector<SymSize> saved_extra;  // other saved storages, in bytes
  std::vector<TracedGrad> grads;     // per input
  SymSize backward_workspace;        // bytes held at the backward's height besides its gradients
  SymSize flops_forward;
  SymSize flops_backward;
  std::optional<AttentionHeads> attention;  // a fused attention kernel's op only
};

}  // namespace headroom
