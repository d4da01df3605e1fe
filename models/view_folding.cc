#include "models/view_folding.h"

#include <set>
#include <utility>

namespace headroom {
namespace {

// A view the simulator replays as nothing: its output shares input 0's storage
// (BindOutputs), it saves nothing and allocates no workspace, and its backward hands the
// output's gradient buffer on as its input's (GradFlow::kPassThrough).
bool IsPlainView(const ImportedOp& op) {
  if (!op.traced || op.inputs.size() != 1 || op.outputs.size() != 1) return false;
  const TracedOp& t = *op.traced;
  return t.aliases_input && t.grads.size() == 1 && t.grads[0] != TracedGrad::kNew &&
         t.saves_input.size() == 1 && !t.saves_input[0] && t.saved_outputs == 0 &&
         t.saved_extra.empty() && t.backward_workspace.empty() && !t.attention;
}

// What a view may read through: an activation, whose gradient the view passes on, or a
// frozen parameter, which gets none. A trainable parameter's gradient is made anew by the
// op that reads it (StepSimulator::ParamGradient), so its view stays.
bool ReadableThrough(const ImportedTensor& x, bool made_by_an_op, TracedGrad grad) {
  if (made_by_an_op) return grad == TracedGrad::kPass;
  return x.role == TensorRole::kParameter && !x.trainable && grad == TracedGrad::kNone;
}

// The local tensors another section reads (by ["shared", i] or ["layer", kind, i]).
std::set<std::pair<const ImportedSection*, int>> ReadElsewhere(const ImportedProgram& program) {
  std::set<std::pair<const ImportedSection*, int>> read;
  const auto note = [&](const SectionRef& r) {
    if (r.kind == SectionRef::Kind::kShared) read.emplace(&program.prologue, r.index);
    if (r.kind == SectionRef::Kind::kLayer) {
      if (auto it = program.templates.find(r.layer_kind); it != program.templates.end())
        read.emplace(&it->second, r.index);
    }
  };
  const auto scan = [&](const ImportedSection& s) {
    for (const ImportedOp& op : s.ops) {
      for (const SectionRef& r : op.inputs) note(r);
    }
    for (const ImportedTensor& t : s.tensors) {
      if (t.alias_of) note(*t.alias_of);
    }
    for (const auto& [t, until] : s.holds) note(t);
    for (const SectionRef& t : s.held_until_forward_end) note(t);
  };
  scan(program.prologue);
  for (const auto& [kind, s] : program.templates) scan(s);
  scan(program.epilogue);
  return read;
}

// The ops of `section` that read through, given the tensors other sections read.
std::vector<bool> FoldableIn(const ImportedSection& section,
                             const std::set<std::pair<const ImportedSection*, int>>& elsewhere) {
  std::vector<bool> folded(section.ops.size(), false);
  // A rolled loop's ops are repeated by position: left whole.
  if (!section.loops.empty()) return folded;
  const size_t n = section.tensors.size();
  std::vector<bool> pinned(n, false);
  const auto pin = [&](int k) {
    if (k >= 0 && static_cast<size_t>(k) < n) pinned[k] = true;
  };
  // Tensors with an identity of their own: handed on to the next section, written into a
  // Python object (kept by the op that made them), or read by another section. Holds
  // need no pin: a hold on the view's output holds its input's buffer, the same one.
  pin(section.output);
  pin(section.loss);
  pin(section.input_embeddings);
  for (int k : section.kept_by_arguments) pin(k);
  for (size_t k = 0; k < n; ++k) {
    if (elsewhere.contains({&section, static_cast<int>(k)})) pin(static_cast<int>(k));
  }
  std::set<int> hold_ends;
  for (const auto& [t, until] : section.holds) hold_ends.insert(until);
  std::vector<int> uses(n, 0);
  std::vector<bool> made(n, false);
  for (const ImportedOp& op : section.ops) {
    for (const SectionRef& r : op.inputs) {
      if (r.kind == SectionRef::Kind::kLocal) ++uses.at(r.index);
    }
    for (int k : op.outputs) made.at(k) = true;
  }
  for (size_t i = 0; i < section.ops.size(); ++i) {
    const ImportedOp& op = section.ops[i];
    if (!IsPlainView(op) || hold_ends.contains(static_cast<int>(i))) continue;
    const SectionRef& in = op.inputs[0];
    if (in.kind != SectionRef::Kind::kLocal) continue;
    const int x = in.index;
    const int y = op.outputs[0];
    // Only this view reads x, so that x's gradient is the view's alone.
    const ImportedTensor& from = section.tensors[x];
    const ImportedTensor& to = section.tensors[y];
    if (uses[x] != 1 || pinned[x] || pinned[y]) continue;
    if (!ReadableThrough(from, made[x], op.traced->grads[0])) continue;
    if (from.dtype != to.dtype || !from.shape.SameNumel(to.shape)) continue;
    // The view's storage is its input's (the file names the base it shares).
    if (to.alias_of) {
      const SectionRef& base = *to.alias_of;
      const bool same = base.kind == SectionRef::Kind::kLocal &&
                        (base.index == x || (from.alias_of && *from.alias_of == base));
      if (!same) continue;
    }
    folded[i] = true;
  }
  return folded;
}

}  // namespace

FoldedViews FindFoldableViews(const ImportedProgram& program, bool fold) {
  const auto elsewhere = ReadElsewhere(program);
  const auto find = [&](const ImportedSection& section) {
    return fold ? FoldableIn(section, elsewhere) : std::vector<bool>(section.ops.size(), false);
  };
  FoldedViews folded;
  folded.emplace(&program.prologue, find(program.prologue));
  for (const auto& [kind, section] : program.templates) folded.emplace(&section, find(section));
  folded.emplace(&program.epilogue, find(program.epilogue));
  return folded;
}

}  // namespace headroom
