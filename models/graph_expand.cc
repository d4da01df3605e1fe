// ExpandImportedGraph: an imported graph file's prologue, one template per decoder layer
// (layer_types), and the epilogue, appended to an OpGraph in the order the model's code
// ran them, each layer a checkpointable block.
#include <utility>

#include <fmt/format.h>

#include "models/graph_file.h"

namespace headroom {
namespace {

class Expander {
 public:
  explicit Expander(OpGraph& graph) : graph_(graph) {}

  // Appends `section`; `prefix` names its parameters and ops (a layer's module path);
  // `input` is what ["input"] refers to. Returns the section's tensors as graph ids.
  std::vector<TensorId> Append(const ImportedSection& section, const std::string& prefix,
                               TensorId input, int block) {
    std::vector<TensorId> local(section.tensors.size());
    const auto resolve = [&](const SectionRef& r) {
      switch (r.kind) {
        case SectionRef::Kind::kLocal:
          return local.at(r.index);
        case SectionRef::Kind::kInput:
          return input;
        case SectionRef::Kind::kShared:
          return shared_.at(r.index);
      }
      return TensorId{};
    };
    for (size_t k = 0; k < section.tensors.size(); ++k) {
      const ImportedTensor& t = section.tensors[k];
      if (t.role == TensorRole::kActivation) continue;
      local[k] = AddLeaf(t, prefix);
    }
    std::vector<OpId> ops;
    if (block >= 0) graph_.BeginBlock(input);
    for (const ImportedOp& op : section.ops) {
      std::vector<TensorId> inputs;
      for (const SectionRef& r : op.inputs) inputs.push_back(resolve(r));
      std::vector<TensorInfo> outputs;
      for (int k : op.outputs) {
        const ImportedTensor& t = section.tensors[k];
        TensorInfo info{.name = prefix + t.name, .shape = t.shape, .fixed_dtype = t.dtype};
        if (t.alias_of) info.alias_of = graph_.StorageOf(resolve(*t.alias_of));
        outputs.push_back(std::move(info));
      }
      const std::vector<TensorId> made = graph_.AddOp({.kind = OpKind::kTraced,
                                                       .name = prefix + op.name,
                                                       .inputs = std::move(inputs),
                                                       .traced = op.traced},
                                                      std::move(outputs));
      for (size_t i = 0; i < made.size(); ++i) local[op.outputs[i]] = made[i];
      ops.push_back(OpId{graph_.num_ops() - 1});
    }
    if (block >= 0) graph_.EndBlock(local.at(section.output));
    for (const auto& [t, until] : section.holds) graph_.HoldUntilOpRan(resolve(t), ops.at(until));
    for (const SectionRef& t : section.held_until_forward_end)
      graph_.HoldUntilForwardEnd(resolve(t));
    return local;
  }

  void SetShared(std::vector<TensorId> shared) { shared_ = std::move(shared); }

 private:
  TensorId AddLeaf(const ImportedTensor& t, const std::string& prefix) {
    const std::string name = prefix + t.name;
    switch (t.role) {
      case TensorRole::kInput:
        return graph_.AddInput(name, t.shape, t.dtype);
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
  std::vector<TensorId> shared_;
};

Result<bool> CheckRegime(const ImportedGraph& imported, const GraphOptions& options) {
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
  if (above || (options.seq_len > 0 && options.seq_len < imported.min_seq_len)) {
    return MakeError(fmt::format(
        "{}: the graph was imported for sequences of {} to {} tokens; at {} transformers runs "
        "another program (a sliding-window or chunked mask) that it did not record",
        imported.model_type, imported.min_seq_len,
        imported.max_seq_len > 0 ? std::to_string(imported.max_seq_len) : "any", options.seq_len));
  }
  return true;
}

}  // namespace

Result<OpGraph> ExpandImportedGraph(const ImportedGraph& imported, const GraphOptions& options) {
  if (auto ok = CheckRegime(imported, options); !ok) return ok.error();
  const ImportedProgram& program =
      options.single_sample && imported.micro_batch_1 ? *imported.micro_batch_1 : imported.program;
  OpGraph graph;
  Expander expander(graph);
  const std::vector<TensorId> prologue = expander.Append(program.prologue, "", {}, -1);
  expander.SetShared(prologue);
  if (program.prologue.input_embeddings >= 0)
    graph.MarkInputEmbeddings(prologue.at(program.prologue.input_embeddings));
  TensorId hidden = prologue.at(program.prologue.output);
  for (size_t k = 0; k < imported.layer_types.size(); ++k) {
    const ImportedSection& layer = program.templates.at(imported.layer_types[k]);
    const std::string prefix = fmt::format("{}{}.", imported.layer_prefix, k);
    hidden = expander.Append(layer, prefix, hidden, static_cast<int>(k)).at(layer.output);
  }
  const std::vector<TensorId> epilogue = expander.Append(program.epilogue, "", hidden, -1);
  graph.SetLoss(epilogue.at(program.epilogue.loss));
  graph.CheckWellFormed();
  return graph;
}

}  // namespace headroom
