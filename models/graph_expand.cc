// ExpandImportedGraph: an imported graph file's prologue, one template per decoder layer
// (layer_types), and the epilogue, appended to an OpGraph in the order the model's code
// ran them, each layer a checkpointable block and a rolled loop's middle iteration
// repeated once per chunk of the plan's sequence (twice, the first standing for all but
// one of them, when they are more than two: RepeatedOps).
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "models/graph_file.h"
#include "models/view_folding.h"

namespace headroom {
namespace {

// Where a loop's ops and tensors landed, repetition by repetition of its middle iteration.
struct UnrolledLoop {
  const ImportedLoop* loop = nullptr;
  std::vector<std::vector<OpId>> ops;                      // [repetition][offset]
  std::vector<std::unordered_map<int, TensorId>> tensors;  // [repetition]: local -> id
  // The part of the loop op `i` belongs to: 0 first, 1 middle, 2 last iteration, -1 none.
  int Part(int i) const {
    const int start = loop->first_op - loop->ops;
    return i < start || i >= start + 3 * loop->ops ? -1 : (i - start) / loop->ops;
  }
};

class Expander {
 public:
  Expander(OpGraph& graph, int64_t seq_len, bool hold_repetitions_once)
      : graph_(graph), seq_len_(seq_len), hold_repetitions_once_(hold_repetitions_once) {}

  // Appends `section`; `prefix` names its parameters and ops (a layer's module path);
  // `input` is what ["input"] refers to. A rolled loop's middle iteration runs its
  // number of iterations less two times, each repetition reading what the one before it
  // made where the recorded middle iteration read the first. Returns the section's
  // tensors as graph ids (a loop's: its last iteration's). A view `folded` marks is read
  // through: its output is its input (models/view_folding.h).
  Result<std::vector<TensorId>> Append(const ImportedSection& section, const std::string& prefix,
                                       TensorId input, int block, const std::vector<bool>& folded) {
    local_.assign(section.tensors.size(), TensorId{});
    input_ = input;
    made_by_.assign(section.tensors.size(), -1);
    for (size_t i = 0; i < section.ops.size(); ++i) {
      for (int k : section.ops[i].outputs) made_by_[k] = static_cast<int>(i);
    }
    for (size_t k = 0; k < section.tensors.size(); ++k) {
      const ImportedTensor& t = section.tensors[k];
      if (t.role != TensorRole::kActivation) local_[k] = AddLeaf(t, prefix);
    }
    std::vector<UnrolledLoop> loops;
    for (const ImportedLoop& loop : section.loops) loops.push_back({.loop = &loop});
    std::vector<OpId> ops(section.ops.size());
    if (block >= 0) graph_.BeginBlock(input);
    size_t next_loop = 0;
    for (int i = 0; i < static_cast<int>(section.ops.size()); ++i) {
      if (next_loop < loops.size() && i == loops[next_loop].loop->first_op) {
        if (auto ran = RunMiddle(section, prefix, loops[next_loop], ops); !ran) return ran.error();
        i += loops[next_loop++].loop->ops - 1;
        continue;
      }
      if (folded[i]) {
        local_[section.ops[i].outputs[0]] = Resolve(section.ops[i].inputs[0]);
        continue;
      }
      ops[i] = AddOp(section, prefix, i);
    }
    if (block >= 0) {
      graph_.EndBlock(Resolve(SectionRef{.index = section.output}));
      std::vector<TensorId> kept;
      for (int k : section.kept_by_arguments) kept.push_back(Resolve(SectionRef{.index = k}));
      if (!kept.empty()) graph_.KeepByArguments(std::move(kept));
    }
    AddHolds(section, loops, ops);
    return local_;
  }

  void SetShared(std::vector<TensorId> shared) { shared_ = std::move(shared); }
  // The layer just appended from template `kind`: what ["layer", kind, i] reads from now on.
  void SetLatestLayer(const std::string& kind, std::vector<TensorId> made) {
    latest_layer_[kind] = std::move(made);
  }
  // The template kind a reference of `section` reads that no layer expanded so far ran, or
  // nullptr.
  const std::string* MissingLayer(const ImportedSection& section) const {
    const auto missing = [&](const SectionRef& r) {
      return r.kind == SectionRef::Kind::kLayer && !latest_layer_.contains(r.layer_kind);
    };
    for (const ImportedOp& op : section.ops) {
      for (const SectionRef& r : op.inputs) {
        if (missing(r)) return &r.layer_kind;
      }
    }
    for (const ImportedTensor& t : section.tensors) {
      if (t.alias_of && missing(*t.alias_of)) return &t.alias_of->layer_kind;
    }
    for (const auto& [t, until] : section.holds) {
      if (missing(t)) return &t.layer_kind;
    }
    for (const SectionRef& t : section.held_until_forward_end) {
      if (missing(t)) return &t.layer_kind;
    }
    return nullptr;
  }

 private:
  TensorId Resolve(const SectionRef& r) const {
    switch (r.kind) {
      case SectionRef::Kind::kLocal:
        return local_.at(r.index);
      case SectionRef::Kind::kInput:
        return input_;
      case SectionRef::Kind::kShared:
        return shared_.at(r.index);
      case SectionRef::Kind::kLayer:
        return latest_layer_.at(r.layer_kind).at(r.index);
    }
    return TensorId{};
  }

  OpId AddOp(const ImportedSection& section, const std::string& prefix, int i) {
    const ImportedOp& op = section.ops[i];
    std::vector<TensorId> inputs;
    for (const SectionRef& r : op.inputs) inputs.push_back(Resolve(r));
    std::vector<TensorInfo> outputs;
    for (int k : op.outputs) {
      const ImportedTensor& t = section.tensors[k];
      TensorInfo info{.name = prefix + t.name, .shape = t.shape, .fixed_dtype = t.dtype};
      if (t.alias_of) info.alias_of = graph_.StorageOf(Resolve(*t.alias_of));
      outputs.push_back(std::move(info));
    }
    const std::vector<TensorId> made = graph_.AddOp({.kind = OpKind::kTraced,
                                                     .name = prefix + op.name,
                                                     .inputs = std::move(inputs),
                                                     .traced = op.traced},
                                                    std::move(outputs));
    for (size_t k = 0; k < made.size(); ++k) local_[op.outputs[k]] = made[k];
    return OpId{graph_.num_ops() - 1};
  }

  // The middle iteration, repeated. From the second repetition on, a tensor the first
  // iteration made stands for the one the previous repetition made at its place. Past two
  // repetitions, the first stands for all but the last (OpGraph::MarkRepeated): a 32k
  // sequence runs Qwen3-Next's loop 510 times in each of its 36 DeltaNet layers.
  Result<bool> RunMiddle(const ImportedSection& section, const std::string& prefix,
                         UnrolledLoop& unrolled, std::vector<OpId>& ops) {
    const ImportedLoop& loop = *unrolled.loop;
    const int64_t repetitions = SizeIn(loop.iterations, {.seq_len = seq_len_}) - 2;
    if (repetitions < 1) {
      return MakeError(
          fmt::format("a loop over {}-token chunks needs at least 3 of them; a "
                      "sequence of {} tokens has fewer",
                      loop.iterations.value, seq_len_));
    }
    std::vector<std::pair<int, int>> carried;  // (first iteration's tensor, the middle's)
    for (int j = 0; j < loop.ops; ++j) {
      const ImportedOp& first = section.ops[loop.first_op - loop.ops + j];
      const ImportedOp& middle = section.ops[loop.first_op + j];
      for (size_t k = 0; k < first.outputs.size(); ++k)
        carried.emplace_back(first.outputs[k], middle.outputs.at(k));
    }
    std::vector<TensorId> first_iteration;
    for (const auto& [t0, t1] : carried) first_iteration.push_back(local_[t0]);
    const bool held_once = hold_repetitions_once_ && repetitions > 2;
    for (int64_t r = 0; r < (held_once ? 2 : repetitions); ++r) {
      if (r > 0) {
        for (const auto& [t0, t1] : carried) local_[t0] = local_[t1];
      }
      auto& rep_ops = unrolled.ops.emplace_back();
      auto& rep_tensors = unrolled.tensors.emplace_back();
      for (int j = 0; j < loop.ops; ++j) {
        rep_ops.push_back(AddOp(section, prefix, loop.first_op + j));
        for (int k : section.ops[loop.first_op + j].outputs) rep_tensors[k] = local_[k];
      }
    }
    for (size_t c = 0; c < carried.size(); ++c) local_[carried[c].first] = first_iteration[c];
    for (int j = 0; j < loop.ops; ++j) ops[loop.first_op + j] = unrolled.ops.front()[j];
    if (held_once) graph_.MarkRepeated(unrolled.ops.front().front(), loop.ops, repetitions - 1);
    return true;
  }

  // Python's holds. One on a middle iteration's tensor, or on the tensor the first
  // iteration hands the middle one until an op of it, holds in every repetition: the
  // repetition's tensor (or the previous repetition's, in place of the first iteration's)
  // until the op of that repetition, or of the next where the hold ends in the last.
  void AddHolds(const ImportedSection& section, const std::vector<UnrolledLoop>& loops,
                const std::vector<OpId>& ops) {
    for (const auto& [t, until] : section.holds) {
      const int maker = t.kind == SectionRef::Kind::kLocal ? made_by_[t.index] : -1;
      const UnrolledLoop* in = nullptr;
      for (const UnrolledLoop& u : loops) {
        if (u.Part(maker) == 1 || (u.Part(maker) == 0 && u.Part(until) == 1)) in = &u;
      }
      if (!in) {
        graph_.HoldUntilOpRan(Resolve(t), ops.at(until));
        continue;
      }
      const ImportedLoop& loop = *in->loop;
      const int n = static_cast<int>(in->ops.size());
      for (int r = 0; r < n; ++r) {
        TensorId held = in->Part(maker) == 1 ? in->tensors[r].at(t.index)
                        : r == 0             ? Resolve(t)
                                 : in->tensors[r - 1].at(MiddleOf(section, loop, t.index));
        OpId end = ops.at(until);
        if (in->Part(until) == 1) end = in->ops[r][until - loop.first_op];
        if (in->Part(until) == 2 && r + 1 < n)
          end = in->ops[r + 1][until - loop.first_op - loop.ops];
        graph_.HoldUntilOpRan(held, end);
      }
    }
    for (const SectionRef& t : section.held_until_forward_end) {
      graph_.HoldUntilForwardEnd(Resolve(t));
      const int maker = t.kind == SectionRef::Kind::kLocal ? made_by_[t.index] : -1;
      for (const UnrolledLoop& u : loops) {
        if (u.Part(maker) != 1) continue;
        for (size_t r = 0; r + 1 < u.tensors.size(); ++r)
          graph_.HoldUntilForwardEnd(u.tensors[r].at(t.index));
      }
    }
  }

  // The middle iteration's tensor at the place of the first iteration's `t`.
  int MiddleOf(const ImportedSection& section, const ImportedLoop& loop, int t) const {
    const ImportedOp& first = section.ops[made_by_[t]];
    const ImportedOp& middle = section.ops[made_by_[t] + loop.ops];
    for (size_t k = 0; k < first.outputs.size(); ++k) {
      if (first.outputs[k] == t) return middle.outputs.at(k);
    }
    return t;
  }

  TensorId AddLeaf(const ImportedTensor& t, const std::string& prefix) {
    const std::string name = prefix + t.name;
    switch (t.role) {
      case TensorRole::kInput: {
        // What the trace passed the model (input_ids, which also served as labels,
        // pixel_values, token_type_ids): the loop's batch.
        const TensorId input = graph_.AddInput(name, t.shape, t.dtype);
        graph_.MarkBatchInput(input);
        return input;
      }
      case TensorRole::kBuffer:
        return graph_.AddBuffer(name, t.shape, t.dtype);
      case TensorRole::kParameter:
        return graph_.AddParameter(name, t.shape,
                                   {.trainable = t.trainable, .lora_adapter = t.lora});
      case TensorRole::kActivation:
        break;
    }
    return {};
  }

  OpGraph& graph_;
  int64_t seq_len_;
  bool hold_repetitions_once_;
  std::vector<TensorId> shared_;
  std::map<std::string, std::vector<TensorId>> latest_layer_;
  std::vector<TensorId> local_;
  std::vector<int> made_by_;
  TensorId input_;
};

Result<bool> CheckRegime(const ImportedGraph& imported, const GraphOptions& options) {
  if (auto ok = CheckImportedCpuKernel(imported.model_type, options); !ok) return ok.error();
  TraceRegime wanted = TraceRegimeOf(options);
  wanted.min_seq_len = imported.regime.min_seq_len;  // the band is checked below
  wanted.seq_multiple = imported.regime.seq_multiple;
  if (!(wanted == imported.regime)) {
    return MakeError(fmt::format(
        "the graph of {} was imported for {}, not for this plan's {}: import it for this "
        "plan (headroom plan --model CONFIG.json imports what it needs)",
        imported.model_type, DescribeRegime(imported.regime), DescribeRegime(wanted)));
  }
  if (options.fine_tune.mode != FineTuneMode::kFull && options.fine_tune.lora_dropout > 0)
    return MakeError(
        "LoRA dropout is not planned for imported model types (its masks are "
        "not in the recorded program)");
  const int64_t chunk = imported.sequence_chunk;
  if (chunk > 0 && options.seq_len > 0 &&
      (options.seq_len % chunk == 0) != (imported.regime.seq_multiple == chunk)) {
    return MakeError(fmt::format(
        "{}: the graph was imported for sequences {} whole {}-token chunks; at {} tokens "
        "transformers runs another program (it slices the padded chunks only when the "
        "sequence is no whole number of them) that it did not record",
        imported.model_type, imported.regime.seq_multiple ? "of" : "of no", chunk,
        options.seq_len));
  }
  const bool above = imported.max_seq_len > 0 && options.seq_len > imported.max_seq_len;
  if (imported.regime.images > 0 && options.seq_len > 0 && options.seq_len < imported.min_seq_len &&
      imported.regime.min_seq_len == 0) {
    return MakeError(fmt::format(
        "{}: {} per sample take{} {} tokens of the sequence; plan --seq-len of at least {}",
        imported.model_type,
        imported.regime.images > 1 ? fmt::format("{} images", imported.regime.images) : "1 image",
        imported.regime.images > 1 ? "" : "s", imported.min_seq_len - 1, imported.min_seq_len));
  }
  if (above || (options.seq_len > 0 && options.seq_len < imported.min_seq_len)) {
    return MakeError(fmt::format(
        "{}: the graph was imported for sequences of {} to {} tokens; at {} transformers runs "
        "another program (a sliding-window or chunked mask) that it did not record",
        imported.model_type, imported.min_seq_len,
        imported.max_seq_len > 0 ? std::to_string(imported.max_seq_len) : "any", options.seq_len));
  }
  return true;
}

// One line per module whose code loops over the sequence's chunks: the plan is for that
// reference code, and a fused kernel a GPU install may run instead is not modelled.
void AddLoopAssumptions(const ImportedProgram& program, int64_t seq_len, OpGraph& graph) {
  std::set<std::string> seen;
  for (const auto& [kind, section] : program.templates) {
    for (const ImportedLoop& loop : section.loops) {
      const std::string& name = section.ops.at(loop.first_op).name;
      const std::string module(ModuleOfTracedName(name));
      if (!seen.insert(module).second) continue;
      graph.AddAssumption(fmt::format(
          "{}: the model's reference code, a Python loop over {}-token chunks ({} at this "
          "sequence), every iteration planned",
          module, loop.iterations.value, SizeIn(loop.iterations, {.seq_len = seq_len})));
    }
  }
}

// Room for the sections' ops and tensors, a rolled loop counted once (its other
// iterations are not known before the sequence is).
void ReserveFor(const ImportedProgram& program, const std::vector<std::string>& layer_types,
                OpGraph& graph) {
  size_t ops = program.prologue.ops.size() + program.epilogue.ops.size();
  size_t tensors = program.prologue.tensors.size() + program.epilogue.tensors.size();
  for (const std::string& type : layer_types) {
    const ImportedSection& layer = program.templates.at(type);
    ops += layer.ops.size();
    tensors += layer.tensors.size();
  }
  graph.Reserve(static_cast<int>(ops), static_cast<int>(tensors));
}

}  // namespace

Result<bool> CheckImportedCpuKernel(std::string_view model_type, const GraphOptions& options) {
  const auto kernel = options.cpu_bf16_matmul;
  if (!kernel || *kernel == CpuBf16::kAtenGemm) return true;
  return MakeError(fmt::format(
      "{}: an imported model type's 16-bit matmuls are planned on the CPU for ATen's gemm "
      "only; the scratch of oneDNN's {} kernel is modelled for the built model types, not for "
      "recorded products: plan it with --cpu-bf16 aten, on a GPU, or in fp32",
      model_type, CpuBf16Name(*kernel)));
}

Result<OpGraph> ExpandImportedGraph(const ImportedGraph& imported, const GraphOptions& options,
                                    const ExpandChoices& choices) {
  if (auto ok = CheckRegime(imported, options); !ok) return ok.error();
  const ImportedProgram& program =
      options.single_sample && imported.micro_batch_1 ? *imported.micro_batch_1 : imported.program;
  OpGraph graph;
  ReserveFor(program, imported.layer_types, graph);
  Expander expander(graph, options.seq_len, choices.hold_repetitions_once);
  const FoldedViews folded = FindFoldableViews(program, choices.fold_views);
  Result<std::vector<TensorId>> prologue =
      expander.Append(program.prologue, "", {}, -1, folded.at(&program.prologue));
  if (!prologue) return prologue.error();
  expander.SetShared(*prologue);
  if (program.prologue.input_embeddings >= 0)
    graph.MarkInputEmbeddings(prologue->at(program.prologue.input_embeddings));
  TensorId hidden = prologue->at(program.prologue.output);
  for (size_t k = 0; k < imported.layer_types.size(); ++k) {
    const ImportedSection& layer = program.templates.at(imported.layer_types[k]);
    const std::string prefix = fmt::format("{}{}.", imported.layer_prefix, k);
    if (const std::string* kind = expander.MissingLayer(layer)) {
      return MakeError(fmt::format(
          "{}: decoder layer {} reads a tensor of a layer of kind '{}', and no layer before it "
          "is of that kind",
          imported.model_type, k, *kind));
    }
    Result<std::vector<TensorId>> made =
        expander.Append(layer, prefix, hidden, static_cast<int>(k), folded.at(&layer));
    if (!made) return made.error();
    hidden = made->at(layer.output);
    expander.SetLatestLayer(imported.layer_types[k], *made);
  }
  Result<std::vector<TensorId>> epilogue =
      expander.Append(program.epilogue, "", hidden, -1, folded.at(&program.epilogue));
  if (!epilogue) return epilogue.error();
  graph.SetLoss(epilogue->at(program.epilogue.loss));
  for (const std::string& line : imported.assumptions) graph.AddAssumption(line);
  AddLoopAssumptions(program, options.seq_len, graph);
  graph.CheckWellFormed();
  return graph;
}

}  // namespace headroom
