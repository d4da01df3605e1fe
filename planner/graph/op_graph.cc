#include "planner/graph/op_graph.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <boost/graph/topological_sort.hpp>

#include "planner/core/checked_math.h"

namespace headroom {

OpGraph::BlockReads OpGraph::ExternalReads(int block) const {
  const BlockSegment& seg = blocks_.at(block);
  BlockReads reads{.distinct = {seg.input}, .all = {}};
  for (int o = seg.first_op.value; o <= seg.last_op.value; ++o) {
    for (TensorId in : op(OpId{o}).inputs) {
      const TensorInfo& info = tensor(in);
      const bool inside = info.producer.valid() && op(info.producer).block == block;
      if (info.role == TensorRole::kParameter || info.role == TensorRole::kBuffer || inside)
        continue;
      reads.all.push_back(in);
      if (std::find(reads.distinct.begin(), reads.distinct.end(), in) == reads.distinct.end())
        reads.distinct.push_back(in);
    }
  }
  return reads;
}

int OpGraph::UsesWithinBlock(TensorId t, int block, OpId last_op) const {
  int uses = 0;
  for (OpId c : Consumers(t)) uses += op(c).block == block && c.value <= last_op.value ? 1 : 0;
  return uses;
}

void OpGraph::Reserve(int ops, int tensors) {
  (*graph_).m_vertices.reserve(static_cast<size_t>(ops));
  tensors_.reserve(static_cast<size_t>(tensors));
  consumers_.reserve(static_cast<size_t>(tensors));
}

TensorId OpGraph::AddTensor(TensorInfo info) {
  TensorId id{static_cast<int32_t>(tensors_.size())};
  if (info.alias_of) info.alias_of = StorageOf(*info.alias_of);
  tensors_.push_back(std::move(info));
  consumers_.emplace_back();
  return id;
}

TensorId OpGraph::AddInput(std::string name, SymShape shape, DType dtype) {
  return AddTensor({.name = std::move(name),
                    .shape = std::move(shape),
                    .role = TensorRole::kInput,
                    .fixed_dtype = dtype});
}

TensorId OpGraph::AddBuffer(std::string name, SymShape shape, DType dtype) {
  return AddTensor({.name = std::move(name),
                    .shape = std::move(shape),
                    .role = TensorRole::kBuffer,
                    .fixed_dtype = dtype});
}

TensorId OpGraph::AddWeightDtypeBuffer(std::string name, SymShape shape) {
  return AddTensor(
      {.name = std::move(name), .shape = std::move(shape), .role = TensorRole::kBuffer});
}

TensorId OpGraph::AddParameter(std::string name, SymShape shape, ParamOptions options) {
  if (!shape.IsStatic()) throw std::logic_error("parameter " + name + " must have a static shape");
  return AddTensor({.name = std::move(name),
                    .shape = std::move(shape),
                    .role = TensorRole::kParameter,
                    .param = options});
}

std::vector<TensorId> OpGraph::AddOp(OpNode op, std::vector<TensorInfo> outputs) {
  const OpId op_id{static_cast<int32_t>(boost::num_vertices(*graph_))};
  for (TensorId in : op.inputs) {
    if (!in.valid() || in.value >= num_tensors())
      throw std::logic_error("AddOp: " + op.name + " reads an unknown tensor");
  }
  op.block = current_block_;
  op.outputs.clear();
  for (TensorInfo& info : outputs) {
    info.role = TensorRole::kActivation;
    info.producer = op_id;
    info.block = current_block_;
    op.outputs.push_back(AddTensor(std::move(info)));
  }
  std::vector<TensorId> inputs = op.inputs;
  std::vector<TensorId> result = op.outputs;
  auto v = boost::add_vertex(std::move(op), *graph_);
  for (TensorId in : inputs) {
    consumers_[in.value].push_back(op_id);
    const TensorInfo& t = tensors_[in.value];
    if (t.producer.valid()) boost::add_edge(t.producer.value, v, EdgeInfo{in}, *graph_);
  }
  return result;
}

void OpGraph::BeginBlock(TensorId input) {
  if (current_block_ != -1) throw std::logic_error("BeginBlock: blocks do not nest");
  current_block_ = static_cast<int>(blocks_.size());
  blocks_.push_back({.first_op = OpId{num_ops()}, .input = input});
}

void OpGraph::EndBlock(TensorId output) {
  if (current_block_ == -1) throw std::logic_error("EndBlock without BeginBlock");
  blocks_.back().last_op = OpId{num_ops() - 1};
  blocks_.back().output = output;
  current_block_ = -1;
}

void OpGraph::KeepByArguments(std::vector<TensorId> tensors) {
  if (blocks_.empty() || current_block_ != -1)
    throw std::logic_error("KeepByArguments: no block has ended");
  for (TensorId t : tensors) {
    const OpId p = tensor(t).producer;
    if (!p.valid() || p.value < blocks_.back().first_op.value)
      throw std::logic_error("KeepByArguments: " + tensor(t).name + " is not the block's");
  }
  blocks_.back().kept_by_arguments = std::move(tensors);
}

void OpGraph::MarkRepeated(OpId first_op, int ops, int64_t times) {
  // The simulator tells what one repetition leaves live by the next one's end.
  if (ops <= 0 || times < 1 || first_op.value < 0 || first_op.value + 2 * ops > num_ops())
    throw std::logic_error("MarkRepeated: the repetition and the one after it must exist");
  if (!repeated_.empty() &&
      first_op.value < repeated_.back().first_op.value + 2 * repeated_.back().ops)
    throw std::logic_error("MarkRepeated: repetitions overlap or are out of order");
  const int block = op(first_op).block;
  if (op(OpId{first_op.value + 2 * ops - 1}).block != block)
    throw std::logic_error("MarkRepeated: a repetition crosses a block's edge");
  repeated_.push_back({first_op, ops, times});
}

std::vector<int64_t> OpGraph::ExecutionsPerOp() const {
  std::vector<int64_t> executions(num_ops(), 1);
  for (const RepeatedOps& r : repeated_) {
    for (int o = r.first_op.value; o < r.first_op.value + r.ops; ++o) executions[o] = r.times;
  }
  return executions;
}

std::vector<TensorId> OpGraph::Parameters() const {
  std::vector<TensorId> out;
  for (int i = 0; i < num_tensors(); ++i) {
    if (tensors_[i].role == TensorRole::kParameter) out.push_back(TensorId{i});
  }
  return out;
}

TensorId OpGraph::InputEmbeddingTable() const {
  if (!input_embeddings_.valid()) return {};
  OpId lookup = tensor(input_embeddings_).producer;
  // Built graphs: embedding(ids, table), or Gemma's scale of it. Traced ones: the op's
  // parameter input (aten.embedding(table, ids)), else that of the op making its input 0
  // (a scaled embedding module).
  for (int depth = 0; depth < 2 && lookup.valid(); ++depth) {
    const OpNode& l = op(lookup);
    if (l.kind == OpKind::kEmbedding) return l.inputs.at(1);
    if (l.kind == OpKind::kTraced) {
      for (TensorId in : l.inputs) {
        if (tensor(in).role == TensorRole::kParameter) return in;
      }
    } else if (l.kind != OpKind::kScale) {
      return {};
    }
    if (l.inputs.empty()) return {};
    lookup = tensor(l.inputs[0]).producer;
  }
  return {};
}

TensorId OpGraph::StorageOf(TensorId id) const {
  const TensorInfo& t = tensors_.at(id.value);
  return t.alias_of ? *t.alias_of : id;
}

void OpGraph::CheckWellFormed() const {
  std::vector<Graph::vertex_descriptor> order;
  boost::topological_sort(*graph_, std::back_inserter(order));  // throws not_a_dag on a cycle
  auto [edges_begin, edges_end] = boost::edges(*graph_);
  for (auto it = edges_begin; it != edges_end; ++it) {
    if (boost::source(*it, *graph_) >= boost::target(*it, *graph_)) {
      throw std::logic_error(fmt::format("op graph: op {} reads a tensor produced later",
                                         (*graph_)[boost::target(*it, *graph_)].name));
    }
  }
  if (!loss_.valid()) throw std::logic_error("op graph: no loss tensor");
  for (const BlockSegment& b : blocks_) {
    for (int op = b.first_op.value; op <= b.last_op.value; ++op) {
      for (TensorId in : (*graph_)[op].inputs) {
        const TensorInfo& t = tensors_[in.value];
        const bool inside = t.producer.valid() && t.producer.value >= b.first_op.value;
        // An imported graph's prologue makes its tables with traced ops (rotary cos/sin,
        // masks, position ids), which the layers read as shared tensors; an imported
        // layer may read an earlier layer's tensor (Gemma 4's shared K/V).
        const bool table_or_traced =
            t.producer.valid() && ((*graph_)[t.producer.value].kind == OpKind::kRopeTables ||
                                   (*graph_)[t.producer.value].kind == OpKind::kCausalMask ||
                                   (*graph_)[t.producer.value].kind == OpKind::kWindowMask ||
                                   (*graph_)[t.producer.value].kind == OpKind::kTraced);
        const bool allowed = inside || in == b.input || t.role == TensorRole::kParameter ||
                             t.role == TensorRole::kBuffer || t.role == TensorRole::kInput ||
                             table_or_traced;
        if (!allowed)
          throw std::logic_error("op graph: block reads an unexpected tensor " + t.name);
      }
    }
  }
}

int64_t OpGraph::ParameterCount() const {
  int64_t n = 0;
  for (TensorId p : Parameters())
    n = CheckedAdd(n, tensor(p).shape.Numel({}), "the parameter count");
  return n;
}

int64_t OpGraph::TrainableParameterCount() const {
  int64_t n = 0;
  for (TensorId p : Parameters()) {
    if (tensor(p).param.trainable)
      n = CheckedAdd(n, tensor(p).shape.Numel({}), "the parameter count");
  }
  return n;
}

}  // namespace headroom
