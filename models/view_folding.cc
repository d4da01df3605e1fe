#include "models/view_folding.h"

#include <algorithm>
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

// Tensors by their section and local index.
using ReadElsewhereSet = std::set<std::pair<const ImportedSection*, int>>;

// The local tensors another section reads (by ["shared", i] or ["layer", kind, i]).
ReadElsewhereSet ReadElsewhere(const ImportedProgram& program) {
  ReadElsewhereSet read;
  const auto note = [&](const SectionRef& r) {
    if (r.kind == SectionRef::Kind::kShared) read.emplace(&program.prologue, r.index);
    if (r.kind != SectionRef::Kind::kLayer) return;
    // The kind's template, and layer 0's own one ("<kind>@0") when the import lifted it.
    for (const auto& [kind, section] : program.templates) {
      if (kind == r.layer_kind || kind.starts_with(r.layer_kind + "@"))
        read.emplace(&section, r.index);
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

// What one section's tensors are to its ops.
struct SectionUse {
  // Tensors with an identity of their own: handed on to the next section, written into a
  // Python object (kept by the op that made them), or read by another section. Holds
  // need no pin: a hold on the view's output holds its input's buffer, the same one.
  std::vector<bool> pinned;
  std::vector<int> reads;   // by the section's ops
  std::vector<bool> made;   // by one of them
  std::set<int> hold_ends;  // ops a hold ends at

  SectionUse(const ImportedSection& section, const ReadElsewhereSet& elsewhere)
      : pinned(section.tensors.size(), false),
        reads(section.tensors.size(), 0),
        made(section.tensors.size(), false) {
    const int n = static_cast<int>(section.tensors.size());
    for (int k : {section.output, section.loss, section.input_embeddings}) {
      if (k >= 0 && k < n) pinned[k] = true;
    }
    for (int k : section.kept_by_arguments) pinned.at(k) = true;
    for (int k = 0; k < n; ++k) {
      if (elsewhere.contains({&section, k})) pinned[k] = true;
    }
    for (const auto& [t, until] : section.holds) hold_ends.insert(until);
    for (const ImportedOp& op : section.ops) {
      for (const SectionRef& r : op.inputs) {
        if (r.kind == SectionRef::Kind::kLocal) ++reads.at(r.index);
      }
      for (int k : op.outputs) made.at(k) = true;
    }
  }
};

// Whether `op`, a plain view, reads through from its input x to its output y.
bool ReadsThrough(const ImportedSection& section, const SectionUse& use, const ImportedOp& op) {
  const SectionRef& in = op.inputs[0];
  if (in.kind != SectionRef::Kind::kLocal) return false;
  const int x = in.index;
  const int y = op.outputs[0];
  const ImportedTensor& from = section.tensors[x];
  const ImportedTensor& to = section.tensors[y];
  // Only this view reads x, so that x's gradient is the view's alone.
  if (use.reads[x] != 1 || use.pinned[x] || use.pinned[y]) return false;
  if (!ReadableThrough(from, use.made[x], op.traced->grads[0])) return false;
  if (from.dtype != to.dtype || !from.shape.SameNumel(to.shape)) return false;
  // The view's storage is its input's (the file names the base it shares).
  if (!to.alias_of) return true;
  const SectionRef& base = *to.alias_of;
  return base.kind == SectionRef::Kind::kLocal &&
         (base.index == x || (from.alias_of && *from.alias_of == base));
}

// The ops of `section` that read through, given the tensors other sections read.
std::vector<bool> FoldableIn(const ImportedSection& section, const ReadElsewhereSet& elsewhere) {
  // A rolled loop's ops, its first, middle and last iterations, are repeated and carried
  // by position: left whole.
  std::vector<bool> in_loop(section.ops.size(), false);
  for (const ImportedLoop& loop : section.loops) {
    const int start = loop.first_op - loop.ops;
    for (int i = std::max(start, 0); i < std::min<int>(start + 3 * loop.ops, in_loop.size()); ++i)
      in_loop[i] = true;
  }
  const SectionUse use(section, elsewhere);
  std::vector<bool> folded(section.ops.size(), false);
  for (size_t i = 0; i < section.ops.size(); ++i) {
    const ImportedOp& op = section.ops[i];
    folded[i] = !in_loop[i] && IsPlainView(op) && !use.hold_ends.contains(static_cast<int>(i)) &&
                ReadsThrough(section, use, op);
  }
  return folded;
}

}  // namespace

FoldedViews FindFoldableViews(const ImportedProgram& program, bool fold) {
  const ReadElsewhereSet elsewhere = fold ? ReadElsewhere(program) : ReadElsewhereSet{};
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
