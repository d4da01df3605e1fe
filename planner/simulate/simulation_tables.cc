#include <algorithm>
#include <bit>
#include <memory>

#include "planner/core/checked_math.h"
#include "planner/core/training_stack.h"
#include "planner/simulate/granularity.h"
#include "planner/simulate/internal/simulation_tables_impl.h"

namespace headroom {

SimulationTables::Impl::Impl(const OpGraph& g, const TrainingConfig& c)
    : graph(g), states(g, RegimeOf(c), CostTargetOf(c)), env{1, c.seq_len} {
  TabulateTensors(c);
  TabulateOps();
  TabulateBlocks();
  shards = LayoutShards(g, states, parameters, bytes, c.parallel, c.kernels.cuda);
  param_index.assign(g.num_tensors(), -1);
  for (size_t i = 0; i < parameters.size(); ++i)
    param_index[parameters[i].value] = static_cast<int32_t>(i);
  const OptimizerImpl impl = EffectiveOptimizerImpl(c);
  const bool step_on_device = states.target().StepTensorOnDevice(impl);
  if (c.parallel.sharding == Sharding::kZero2) {
    // DeepSpeed hands the optimizer its fp32 partition as the only parameter; the flat
    // master replaces the per-parameter ones.
    std::fill(master_bytes.begin(), master_bytes.end(), 0);
    zero_flat_cost = CostOptimizer(c.optimizer, impl, SymShape{Dim::C(shards.zero.partition_numel)},
                                   DType::kF32, /*master_weights=*/false, step_on_device);
    return;
  }
  if (c.parallel.sharding == Sharding::kZero3) {
    // The optimizer holds one fp32 partition per sub-group (stage3.py
    // _create_fp32_partitions).
    std::fill(master_bytes.begin(), master_bytes.end(), 0);
    for (int64_t numel : shards.zero3.sub_group_numel)
      zero3_sub_group_costs.push_back(CostOptimizer(c.optimizer, impl, SymShape{Dim::C(numel)},
                                                    DType::kF32, /*master_weights=*/false,
                                                    step_on_device));
    return;
  }
  if (!c.parallel.fsdp()) return;
  // FSDP2's optimizer updates the local shard: states and temporaries of its rows.
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!trainable[parameters[i].value]) continue;
    const TensorInfo& info = g.tensor(parameters[i]);
    const int64_t numel = info.shape.Numel({});
    const int64_t rows = info.shape.dims().empty() ? 1 : info.shape.dims()[0].value;
    const SymShape shard = info.shape.dims().size() <= 1
                               ? SymShape{Dim::C(shards.local_rows[i])}
                               : SymShape{Dim::C(shards.local_rows[i]), Dim::C(numel / rows)};
    optimizer_costs[i] =
        CostOptimizer(c.optimizer, impl, shard, states.OptimizerStateDType(parameters[i]),
                      states.regime().master_weights, step_on_device);
    if (master_bytes[i] > 0) master_bytes[i] = StorageBytes(DType::kF32, shard.Numel({}));
  }
}

// Per tensor: bytes, uses, roles; per parameter: master copy and optimizer states.
void SimulationTables::Impl::TabulateTensors(const TrainingConfig& c) {
  const OpGraph& g = graph;
  const PrecisionRegime& regime = states.regime();
  const OptimizerImpl impl = EffectiveOptimizerImpl(c);
  for (int o = 0; o < g.num_ops(); ++o) block_of_op.push_back(g.op(OpId{o}).block);
  for (int t = 0; t < g.num_tensors(); ++t) {
    const TensorId id{t};
    const TensorInfo& info = g.tensor(id);
    bytes.push_back(states.Bytes(g, id, env));
    per_sample.push_back(info.shape.ScalesWithBatch());
    forward_uses.push_back(id == g.loss() ? 1 : static_cast<int>(g.Consumers(id).size()));
    // Buffers, like parameters, live through the whole step whatever reads them.
    is_param.push_back(info.role == TensorRole::kParameter || info.role == TensorRole::kBuffer);
    if (info.role == TensorRole::kBuffer) model_buffers.push_back(id);
    trainable.push_back(info.role == TensorRole::kParameter && info.param.trainable);
    producer_block.push_back(info.producer.valid() ? block_of_op[info.producer.value] : -1);
    if (info.role == TensorRole::kInput) data_inputs.push_back(id);
    if (info.role != TensorRole::kParameter) continue;
    parameters.push_back(id);
    const int64_t numel = info.shape.Numel({});
    master_bytes.push_back(
        regime.master_weights && info.param.trainable ? StorageBytes(DType::kF32, numel) : 0);
    optimizer_costs.push_back(
        info.param.trainable
            ? CostOptimizer(c.optimizer, impl, info.shape, states.OptimizerStateDType(id),
                            regime.master_weights, states.target().StepTensorOnDevice(impl))
            : OptimizerParamCost{});
  }
  for (TensorId t : g.held_until_forward_end()) ++forward_uses[t.value];
  // A Python loop's batch (OpGraph::MarkBatchInput) stays referenced until the
  // micro-batch's backward returns (HF Trainer's training_step holds `inputs` alike);
  // headroom's runtime frees each input at its last use.
  if (RunsPythonStack(c.stack)) {
    held_batch = g.batch_inputs();
    for (TensorId t : held_batch) ++forward_uses[t.value];
  }
  released_after_op.assign(g.num_ops(), {});
  for (auto [t, op] : g.held_until_op()) {
    ++forward_uses[t.value];
    released_after_op[op.value].push_back(t);
  }
  // The hook's output is a leaf when the embedding table is frozen (or none made it).
  const TensorId e = g.input_embeddings();
  const TensorId table = g.InputEmbeddingTable();
  if (e.valid() && states[e].requires_grad && !(table.valid() && states[table].requires_grad)) {
    grad_leaf = e;
    ++forward_uses[e.value];  // the autograd graph's reference, dropped when backward ends
  }
}

// Per op: the cast bytes of its inputs, its forward costs in both grad modes and its
// backward cost, in shared arrays.
void SimulationTables::Impl::TabulateOps() {
  const OpGraph& g = graph;
  // Sized once: an imported graph has thousands of ops, and the tables are made per
  // precision and checkpoint regime a search tries.
  size_t inputs = 0;
  for (int o = 0; o < g.num_ops(); ++o) inputs += g.op(OpId{o}).inputs.size();
  const size_t ops = static_cast<size_t>(g.num_ops());
  first_input.reserve(ops);
  backward_costs.reserve(ops);
  for (std::vector<OpForward>& costs : forward_costs) costs.reserve(ops);
  cast_bytes.reserve(inputs);
  input_grads.reserve(inputs);
  saves_input.reserve(2 * inputs);
  for (int o = 0; o < g.num_ops(); ++o) {
    const OpNode& op = g.op(OpId{o});
    first_input.push_back(static_cast<int>(cast_bytes.size()));
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      cast_bytes.push_back(
          states.IsCast(op, i)
              ? StorageBytes(states.UsedDType(op, i), g.tensor(op.inputs[i]).shape.Numel(env))
              : kNotCast);
    }
    for (bool grad_mode : {false, true}) {
      const ForwardCost cost = CostForward(g, op, states, env, grad_mode);
      forward_costs[grad_mode].push_back(
          {static_cast<int32_t>(internals.size()),
           static_cast<int32_t>(internals.size() + cost.internals.size()),
           static_cast<int32_t>(saves_input.size()), cost.output_aliases_input, cost.saved_outputs,
           cost.workspace_bytes, cost.brgemm, AddChunkedLoss(cost.chunked_loss)});
      internals.insert(internals.end(), cost.internals.begin(), cost.internals.end());
      saves_input.insert(saves_input.end(), cost.saves_input.begin(), cost.saves_input.end());
    }
    const BackwardCost cost = CostBackward(g, op, states, env);
    backward_costs.push_back({static_cast<int32_t>(input_grads.size()), cost.workspace_bytes,
                              cost.weight_grad_scratch_bytes, cost.input_grad_scratch_bytes,
                              cost.workspace_per_sample, cost.input_grad_brgemm,
                              cost.weight_grad_brgemm, cost.workspace_fixed_bytes,
                              AddChunkedLoss(cost.chunked_loss)});
    input_grads.insert(input_grads.end(), cost.input_grads.begin(), cost.input_grads.end());
  }
  CountParamGradArrivals();
}

// The gradients each parameter receives in a backward. The engine runs only the nodes a
// gradient reaches from the loss (engine.cpp, compute_dependencies): an op none of whose
// outputs is read on the way to the loss returns no gradient, to its weights either.
void SimulationTables::Impl::CountParamGradArrivals() {
  const OpGraph& g = graph;
  param_grad_arrivals.assign(g.num_tensors(), 0);
  std::vector<bool> gets_grad(g.num_tensors(), false);
  gets_grad[g.loss().value] = true;
  for (int o = g.num_ops() - 1; o >= 0; --o) {
    const OpNode& op = g.op(OpId{o});
    if (std::none_of(op.outputs.begin(), op.outputs.end(),
                     [&](TensorId t) { return gets_grad[t.value]; }))
      continue;
    const GradFlow* flows = &input_grads[backward_costs[o].grads_begin];
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (flows[i] == GradFlow::kNone) continue;
      gets_grad[op.inputs[i].value] = true;
      if (is_param[op.inputs[i].value]) ++param_grad_arrivals[op.inputs[i].value];
    }
  }
}

// Per block: what it reads from outside, and where a recomputation stops.
void SimulationTables::Impl::TabulateBlocks() {
  const OpGraph& g = graph;
  for (int b = 0; b < static_cast<int>(g.blocks().size()); ++b) {
    // What the block reads from outside: what its checkpoint function saves.
    const BlockSegment& seg = g.blocks()[b];
    external_inputs.push_back(g.ExternalReads(b).distinct);
    // The last op whose forward saves anything: where a non-reentrant recomputation
    // stops (and what triggers it).
    int end = seg.first_op.value - 1;
    for (int o = seg.first_op.value; o <= seg.last_op.value; ++o) {
      const OpForward& f = forward_costs[1][o];
      bool saves = f.saved_outputs != 0;
      for (size_t i = 0; i < g.op(OpId{o}).inputs.size(); ++i)
        saves |= saves_input[f.saves_begin + i] != 0;
      for (int k = f.internals_begin; k < f.internals_end; ++k)
        saves |= internals[k].lifetime == InternalBuffer::Lifetime::kSaved;
      if (saves) end = o;
    }
    recompute_end.push_back(end);
  }
}

SimulationTables::SimulationTables(const OpGraph& graph, const TrainingConfig& config)
    : impl_(std::make_shared<const Impl>(graph, config)), config_(config) {}
SimulationTables::~SimulationTables() = default;
SimulationTables::SimulationTables(const SimulationTables&) = default;
SimulationTables& SimulationTables::operator=(const SimulationTables&) = default;

SimulationTables SimulationTables::WithBatch(int64_t micro_batch, int64_t grad_accum_steps) const {
  SimulationTables out = *this;
  out.config_.micro_batch = micro_batch;
  out.config_.grad_accum_steps = grad_accum_steps;
  return out;
}

int64_t SimulationTables::TensorBytes(TensorId t, int64_t micro_batch) const {
  const int64_t bytes = impl_->bytes[t.value];
  return impl_->per_sample[t.value] ? CheckedMul(bytes, micro_batch, "a tensor's bytes") : bytes;
}
const OpGraph& SimulationTables::graph() const { return impl_->graph; }
const TensorStates& SimulationTables::states() const { return impl_->states; }
bool SimulationTables::OutputAliasesInput(OpId op) const {
  return impl_->forward_costs[1][op.value].output_aliases_input;
}

SimulationTables::ModelState SimulationTables::FullModelState() const {
  const Impl& t = *impl_;
  ModelState m;
  for (size_t i = 0; i < t.parameters.size(); ++i) {
    // As stored: the shards' dtype under an FSDP2 policy, what the lower bounds split.
    const int64_t bytes = t.states.StoredBytes(t.graph, t.parameters[i]);
    m.weights += bytes;
    if (!t.trainable[t.parameters[i].value]) continue;
    m.gradients += bytes;
    m.optimizer += t.master_bytes[i];
    for (int64_t s : t.optimizer_costs[i].state_bytes) m.optimizer += s;
  }
  return m;
}

int64_t SimulationTables::ActivationOffloadHostBytes(const std::vector<bool>& checkpointed) const {
  if (!config_.activation_offload) return 0;
  const OpGraph& g = impl_->graph;
  int64_t total = 0;
  for (size_t b = 0; b < checkpointed.size() && b < g.blocks().size(); ++b) {
    if (!checkpointed[b]) continue;
    total +=
        std::bit_ceil(static_cast<uint64_t>(TensorBytes(g.blocks()[b].input, config_.micro_batch)));
  }
  return total;
}

int64_t SimulationTables::OffloadCpuBytes() const {
  const Impl& t = *impl_;
  const Parallelism& p = config_.parallel;
  if (p.offload == Offload::kNone) return 0;
  int64_t total = 0;
  auto add_states = [&total](const OptimizerParamCost& cost) {
    for (int64_t s : cost.state_bytes) total += s;
    total += cost.step_tensor_bytes;
  };
  if (p.sharding == Sharding::kZero2) {
    // stage_1_and_2.py: single_partition_of_fp32_groups and its .grad, fp32; the 16-bit
    // param_buffer_of_bit16_for_cpu_offload_groups; temp_grad_buffer_for_cpu_offload.
    const ZeroPartition& z = t.shards.zero;
    int64_t element = 4, largest = 0;
    for (size_t i = 0; i < t.parameters.size(); ++i) {
      if (z.numel[i] == 0) continue;
      element = t.bytes[t.parameters[i].value] / z.numel[i];
      largest = std::max(largest, z.numel[i]);
    }
    total += z.partition_numel * (4 + 4 + element) + largest * element;
    add_states(t.zero_flat_cost);
    return total;
  }
  // FSDP2 CPUOffloadPolicy: every shard, the trainable ones' sharded gradients, masters
  // and states.
  for (size_t i = 0; i < t.parameters.size(); ++i) {
    total += t.shards.local_param_bytes[i];
    if (!t.trainable[t.parameters[i].value]) continue;
    total += t.shards.local_param_bytes[i] + t.master_bytes[i];
    add_states(t.optimizer_costs[i]);
  }
  return total;
}

int64_t SimulationTables::OptimizerStateBytes(int64_t granularity) const {
  if (config_.parallel.offload != Offload::kNone) return 0;  // in CPU RAM
  const Granularity rounding(granularity);
  int64_t total = 0;
  for (size_t i = 0; i < impl_->optimizer_costs.size(); ++i) {
    if (!impl_->shards.owns_optimizer_state[i]) continue;
    for (int64_t bytes : impl_->optimizer_costs[i].state_bytes) total += rounding.RoundUp(bytes);
  }
  for (int64_t bytes : impl_->zero_flat_cost.state_bytes) total += rounding.RoundUp(bytes);
  for (const OptimizerParamCost& cost : impl_->zero3_sub_group_costs)
    for (int64_t bytes : cost.state_bytes) total += rounding.RoundUp(bytes);
  return total;
}

}  // namespace headroom
