// The inside of SimulationTables, for the simulator that reads it (step_simulator.cc)
// and the file that builds it (simulation_tables.cc).
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/simulate/op_cost.h"
#include "planner/simulate/optimizer_model.h"
#include "planner/simulate/shard_layout.h"
#include "planner/simulate/step_simulator.h"
#include "planner/simulate/tensor_states.h"

namespace headroom {

// Every micro-batch, step and checkpoint set repeats the same sizes, costs and uses:
// computed once per precision, optimizer and sequence length, at micro-batch 1, in flat
// arrays the simulator's inner loop reads instead of the graph's tensor records.
struct SimulationTables::Impl {
  Impl(const OpGraph& g, const TrainingConfig& c);
  void TabulateTensors(const TrainingConfig& config);
  void TabulateOps();
  void CountParamGradArrivals();
  void TabulateBlocks();

  static constexpr int64_t kNotCast = -1;  // an op input autocast does not cast

  const OpGraph& graph;
  TensorStates states;
  ShapeEnv env;  // micro-batch 1
  std::vector<int> block_of_op;
  // Per tensor.
  std::vector<int64_t> bytes;  // at (1, s)
  // Flags as bytes, not std::vector<bool>: read in the inner loop, where extracting
  // bits costs more than the memory saved.
  std::vector<uint8_t> per_sample;  // scales with b
  std::vector<int> forward_uses;    // consumers in a full forward
  // Per op: the tensors Python stops holding once the op has run (OpGraph::HoldUntilOpRan).
  std::vector<std::vector<TensorId>> released_after_op;
  std::vector<uint8_t> is_param;
  std::vector<uint8_t> trainable;       // a parameter that gets a gradient
  std::vector<int> producer_block;      // the block of the op that makes it; -1 if none
  std::vector<TensorId> data_inputs;    // token ids, labels
  std::vector<TensorId> held_batch;     // the loop's batch, let go when the backward ends
  std::vector<TensorId> model_buffers;  // allocated at setup with the weights
  // The input embedding's output when a hook made it a leaf that requires grad
  // (CostTarget::input_embeddings_require_grad over a frozen embedding): it and its
  // gradient stay alive until the backward pass ends. Invalid otherwise.
  TensorId grad_leaf;
  // Per parameter, in graph.Parameters() order.
  std::vector<TensorId> parameters;
  std::vector<int64_t> master_bytes;                // its fp32 master copy; 0 if none
  std::vector<OptimizerParamCost> optimizer_costs;  // empty for frozen parameters
  ShardLayout shards;  // what the replayed rank holds (everything on one rank)
  // ZeRO-2: the optimizer over the rank's fp32 partition, one flat tensor.
  OptimizerParamCost zero_flat_cost;
  std::vector<OptimizerParamCost> zero3_sub_group_costs;  // ZeRO-3: per optimizer sub-group
  std::vector<int32_t> param_index;  // per tensor: its index in `parameters`; -1 if none
  // Per tensor: how many gradients a backward pass hands a parameter (2 for a tied
  // embedding: the LM head's and the lookup's).
  std::vector<int> param_grad_arrivals;
  // Per op input, from first_input[op]: its bytes (at (1, s)) in the dtype the op uses
  // when autocast casts it; kNotCast otherwise.
  std::vector<int> first_input;
  std::vector<int64_t> cast_bytes;
  std::vector<std::vector<TensorId>> external_inputs;  // per block
  // Per block: the last op whose forward saves anything, where a non-reentrant
  // recomputation (CostTarget::reentrant_checkpoint false) stops.
  std::vector<int> recompute_end;
  // Per op, ForwardCost and BackwardCost with their lists in shared arrays: a few
  // thousand small vectors would each be allocated and freed per set of tables.
  struct OpForward {
    int32_t internals_begin, internals_end;  // into internals
    int32_t saves_begin;                     // into saves_input, one per op input
    bool output_aliases_input;
    uint32_t saved_outputs;  // bit i: output i is saved for backward
    int64_t workspace_bytes;
    BrgemmProduct brgemm;
    int32_t chunked_loss;  // into chunked_losses; -1: none
  };
  struct OpBackward {
    int32_t grads_begin;  // into input_grads, one per op input
    int64_t workspace_bytes;
    int64_t weight_grad_scratch_bytes;
    int64_t input_grad_scratch_bytes;
    bool workspace_per_sample;
    BrgemmProduct input_grad_brgemm, weight_grad_brgemm;
    int64_t workspace_fixed_bytes;
    int32_t chunked_loss;  // into chunked_losses; -1: none
  };
  std::vector<OpForward> forward_costs[2];  // [grad_mode]
  std::vector<InternalBuffer> internals;
  std::vector<uint8_t> saves_input;
  std::vector<OpBackward> backward_costs;
  std::vector<GradFlow> input_grads;
  std::vector<ChunkedLossCall> chunked_losses;  // the ops' TRL fused-head calls

  int32_t AddChunkedLoss(const ChunkedLossCall& call) {
    if (!call.valid()) return -1;
    chunked_losses.push_back(call);
    return static_cast<int32_t>(chunked_losses.size() - 1);
  }
};

}  // namespace headroom
