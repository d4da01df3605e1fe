#include "runtime/graph_executor.h"

#include <climits>
#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "runtime/block_checkpoint.h"
#include "runtime/op_kernels.h"
#include "runtime/torch_dtypes.h"

namespace headroom {
namespace {

constexpr int kKeep = INT_MAX / 2;  // uses of tensors a frame must not release

bool IsParam(const OpGraph& g, TensorId t) { return g.tensor(t).role == TensorRole::kParameter; }

}  // namespace

GraphExecutor::GraphExecutor(const OpGraph& graph, const TrainingConfig& config,
                             const ParameterStore& params, ExpertLoad* expert_load)
    : graph_(graph),
      config_(config),
      params_(params),
      states_(graph, RegimeOf(config.precision), CostTargetOf(config)),
      expert_load_(expert_load) {
  for (int block = 0; block < static_cast<int>(graph.blocks().size()); ++block) {
    OpGraph::BlockReads reads = graph.ExternalReads(block);
    external_inputs_.push_back(std::move(reads.distinct));
    outside_reads_.push_back(std::move(reads.all));
  }
}

at::Tensor GraphExecutor::Forward(std::vector<at::Tensor> inputs,
                                  const std::vector<bool>& checkpointed) {
  Frame f;
  f.values = std::move(inputs);
  f.values.resize(graph_.num_tensors());
  f.uses_left.assign(graph_.num_tensors(), 0);
  for (int t = 0; t < graph_.num_tensors(); ++t) {
    f.uses_left[t] = static_cast<int>(graph_.Consumers(TensorId{t}).size());
  }
  for (int o = 0; o < graph_.num_ops(); ++o) {
    const OpNode& op = graph_.op(OpId{o});
    if (op.block < 0 || !checkpointed.at(op.block)) {
      RunOp(op, f);
      continue;
    }
    const BlockSegment& seg = graph_.blocks()[op.block];
    if (o != seg.first_op.value) continue;  // ran as part of the block
    std::vector<at::Tensor> ext;
    for (TensorId t : external_inputs_[op.block]) ext.push_back(f.values[t.value]);
    at::Tensor out = CheckpointBlock(*this, op.block, ext);
    ext.clear();
    f.values[seg.output.value] = std::move(out);
    for (TensorId in : outside_reads_[op.block]) UseDone(in, f);  // the block's ops have read them
  }
  f.cast_cache.clear();  // autocast exit
  return std::move(f.values[graph_.loss().value]);
}

at::Tensor GraphExecutor::RunBlock(int block, const std::vector<at::Tensor>& external_inputs) {
  const BlockSegment& seg = graph_.blocks().at(block);
  Frame f;
  f.values.resize(graph_.num_tensors());
  f.uses_left.assign(graph_.num_tensors(), 0);
  const auto& ext = external_inputs_[block];
  for (size_t i = 0; i < ext.size(); ++i) {
    f.values[ext[i].value] = external_inputs[i];
    f.uses_left[ext[i].value] = kKeep;  // owned by the caller
  }
  for (int o = seg.first_op.value; o <= seg.last_op.value; ++o) {
    for (TensorId out : graph_.op(OpId{o}).outputs) {
      f.uses_left[out.value] = out == seg.output ? kKeep : graph_.UsesWithinBlock(out, block, seg.last_op);
    }
  }
  for (int o = seg.first_op.value; o <= seg.last_op.value; ++o) RunOp(graph_.op(OpId{o}), f);
  return std::move(f.values[seg.output.value]);
}

void GraphExecutor::UseDone(TensorId t, Frame& frame) {
  if (--frame.uses_left[t.value] == 0) frame.values[t.value].reset();
}

at::Tensor GraphExecutor::Input(const OpNode& op, size_t i, Frame& frame) {
  const TensorId t = op.inputs[i];
  const bool param = IsParam(graph_, t);
  const at::Tensor& value = param ? params_[t] : frame.values[t.value];
  if (!value.defined()) {
    throw std::logic_error("executor: " + op.name + " reads " + graph_.tensor(t).name +
                           ", which is not live");
  }
  const DType used = states_.UsedDType(op, i);
  if (used == states_[t].dtype) return value;
  const c10::ScalarType type = ToScalarType(used);
  if (param && graph_.tensor(t).param.trainable) {
    // Autocast caches the casts of leaf weights that require grad until autocast exits.
    auto it = frame.cast_cache.find(t.value);
    if (it == frame.cast_cache.end()) it = frame.cast_cache.emplace(t.value, value.to(type)).first;
    return it->second;
  }
  return value.to(type);
}

void GraphExecutor::RunOp(const OpNode& op, Frame& f) {
  std::vector<at::Tensor> in;
  for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(Input(op, i, f));
  std::vector<at::Tensor> out = RunKernel({.graph = graph_,
                                          .op = op,
                                          .in = in,
                                          .micro_batch = config_.micro_batch,
                                          .seq_len = config_.seq_len,
                                          .expert_load = expert_load_});
  if (out.size() != op.outputs.size())
    throw std::logic_error("executor: " + op.name + " produced the wrong number of outputs");
  in.clear();
  for (size_t k = 0; k < out.size(); ++k) f.values[op.outputs[k].value] = std::move(out[k]);
  for (TensorId t : op.inputs) {
    if (!IsParam(graph_, t)) UseDone(t, f);
  }
}

}  // namespace headroom
