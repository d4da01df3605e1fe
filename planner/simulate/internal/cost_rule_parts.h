// The vocabulary the cost rules are written in (op_cost.cc, moe_cost_rules.h): the view
// of an op a rule reads, what a forward and a backward rule write, the CostRule template
// each op kind specializes, and the building blocks rules state explicitly.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>
#include <optional>

#include "planner/graph/op_graph.h"
#include "planner/simulate/op_cost.h"
#include "planner/simulate/tensor_states.h"

namespace headroom::cost_rules {

using Lifetime = InternalBuffer::Lifetime;

struct OpView {
  const OpGraph& graph;
  const OpNode& op;
  const TensorStates& states;
  const ShapeEnv& env;

  TensorId in(size_t i) const { return op.inputs.at(i); }
  bool grad(size_t i) const { return states[in(i)].requires_grad; }
  int64_t numel(TensorId t) const { return graph.tensor(t).shape.Numel(env); }
  int64_t in_numel(size_t i) const { return numel(in(i)); }
  int64_t out_numel() const { return numel(op.outputs.at(0)); }
  // Input i has the output's element count at every (b, s) (not broadcast, not split).
  bool in_matches_out(size_t i) const {
    return graph.tensor(in(i)).shape.SameNumel(graph.tensor(op.outputs.at(0)).shape);
  }
  int64_t out_bytes() const { return states.Bytes(graph, op.outputs.at(0), env); }
  bool out_grad() const { return !op.outputs.empty() && states[op.outputs[0]].requires_grad; }
  bool quantized_weight() const {
    return op.kind == OpKind::kLinear && states[in(1)].dtype == DType::kNF4;
  }
  int64_t last_dim(size_t i) const { return graph.tensor(in(i)).shape.dims().back().value; }
  bool produced_by(size_t i, OpKind kind) const {
    const OpId p = graph.tensor(in(i)).producer;
    return p.valid() && graph.op(p).kind == kind;
  }
  // The CPU kernel a bf16 matrix multiply runs, if this op is one.
  std::optional<CpuBf16> cpu_bf16_matmul() const {
    if (ClassOfOp(op) != OpClass::kMatmul || states[op.outputs.at(0)].dtype != DType::kBF16)
      return std::nullopt;
    return states.target().cpu_bf16_matmul;
  }
  int cpu_threads() const { return states.target().cpu_threads; }
};

// What a forward rule reads (the op and its tensors' states) and writes (its cost).
struct ForwardRule {
  const OpView& v;
  ForwardCost& cost;
  bool record;  // autograd records this op: grad mode, and its output requires grad

  // Autograd saves only what the gradients of inputs that require grad need.
  void SaveIf(size_t i, bool cond) { cost.saves_input[i] = record && cond; }
  void SaveOutputIf(size_t i, bool cond) {
    if (record && cond) cost.saved_outputs |= 1u << i;
  }
  Lifetime SavedOr(bool cond) const {
    return record && cond ? Lifetime::kSaved : Lifetime::kTransient;
  }
  void Internal(const char* label, int64_t bytes, Lifetime lifetime) {
    cost.internals.push_back({.label = label, .bytes = bytes, .lifetime = lifetime});
  }
  // One the micro-batch does not scale.
  void FixedInternal(const char* label, int64_t bytes, Lifetime lifetime) {
    cost.internals.push_back(
        {.label = label, .bytes = bytes, .lifetime = lifetime, .per_sample = false});
  }
};

struct BackwardRule {
  const OpView& v;
  BackwardCost& cost;

  int64_t f32_in() const {
    return StorageBytes(DType::kF32, v.op.inputs.empty() ? 0 : v.in_numel(0));
  }
  // The output's gradient is handed to input i unchanged when it requires grad.
  void PassThroughIf(size_t i, bool cond) {
    if (v.grad(i) && cond) cost.input_grads[i] = GradFlow::kPassThrough;
  }
  bool same_dtype_as_out(size_t i) const {
    return v.states[v.in(i)].dtype == v.states[v.op.outputs[0]].dtype;
  }
};

// One specialization per op kind (planner/graph/op_kinds.h) with three static rules:
// Forward(ForwardRule&), Backward(BackwardRule&) and Flops(const OpView&). A kind
// without one is an incomplete type in the dispatch below: it fails to compile.
template <OpKind K>
struct CostRule;

// Building blocks a rule states explicitly.
struct SavesNothing {
  static void Forward(ForwardRule&) {}
};
struct SavesInput0 {
  static void Forward(ForwardRule& r) { r.SaveIf(0, true); }
};
struct SavesOutput {
  static void Forward(ForwardRule& r) { r.SaveOutputIf(0, true); }
};
struct NewGradients {  // each input that requires grad gets a new gradient
  static void Backward(BackwardRule&) {}
};
struct SavesOperandsForEachOther {  // a product: each input's gradient needs the other
  static void Forward(ForwardRule& r) {
    r.SaveIf(0, r.v.grad(1));
    r.SaveIf(1, r.v.grad(0));
  }
};
struct GradientPassesThrough {  // x + c, a copy, cat([empty, x]): backward narrows dY
  static void Backward(BackwardRule& r) { r.PassThroughIf(0, r.same_dtype_as_out(0)); }
};
struct FlopsOfClass {  // by the op's class in the op table
  static OpFlops Flops(const OpView& v) {
    switch (ClassOfOp(v.op)) {
      case OpClass::kLayout:
      case OpClass::kConstant:
        return {};
      case OpClass::kMatmul:
      case OpClass::kAttention:
      case OpClass::kElementwise:
        break;
    }
    // Elementwise and normalization ops: a few FLOPs per element; memory-bound.
    const double forward = 5.0 * static_cast<double>(v.op.outputs.empty() ? 0 : v.out_numel());
    return {forward, v.out_grad() ? 2 * forward : 0.0};
  }
};

}  // namespace headroom::cost_rules
