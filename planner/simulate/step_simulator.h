// Replays optimizer steps over an OpGraph as alloc/free events: setup (weights, master
// weights, cuBLAS workspace), then per step the forward of each micro-batch, its loss
// and backward (with recomputation of checkpointed blocks), gradient accumulation, the
// optimizer step (states appear lazily at the first) and zero_grad(set_to_none=True).
//
// Stage 1. Forward: every tensor is allocated when produced and released at its last
//          use, unless an op saved it; saved tensors live until that op's backward.
// Stage 2. Backward: ops in reverse; gradients of inputs allocated, output gradients and
//          saved tensors released; checkpointed blocks are recomputed first.
// Stage 3. Optimizer step and zero_grad.
// Invariants (checked, std::logic_error on violation): at the end of every step only
// persistent buffers (weights, master weights, optimizer states, workspaces) are live.
#pragma once

#include "planner/simulate/layer.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "planner/core/training_config.h"
#include "planner/graph/op_graph.h"
#include "planner/simulate/memory_timeline.h"
#include "planner/simulate/tensor_states.h"

namespace headroom {

struct SimulationOptions {
  // Steps to replay: the first step allocates optimizer states, the second is the
  // steady state every later step repeats.
  int steps = 2;
  // cuBLAS workspace allocated through the CUDA caching allocator at the first matmul;
  // 0 on CPU.
  int64_t cublas_workspace_bytes = 0;
  // Micro-batches 2..K start from the same live set (every gradient allocated) and run
  // the same events, so by default only micro-batches 1 and K are replayed; the peak is
  // the same. Set to replay all K (a timeline with every micro-batch).
  bool replay_every_micro_batch = false;
};

// What a simulation computes before its first event (sizes, per-op and optimizer costs,
// uses) for a graph, precision, optimizer and sequence length. Sizes are kept at
// micro-batch 1 and scaled when an event is made: a size that depends on the batch has
// exactly one batch dimension (SymShape::ScalesWithBatch), so it is proportional to the
// micro-batch, and every micro-batch and accumulation of a configuration shares one set
// of tables (WithBatch). Copies share the tables; they refer to `graph`, which must
// outlive them.
class SimulationTables {
 public:
  SimulationTables(const OpGraph& graph, const TrainingConfig& config);
  ~SimulationTables();
  SimulationTables(const SimulationTables&);
  SimulationTables& operator=(const SimulationTables&);

  // The same tables for another micro-batch and number of accumulation steps.
  SimulationTables WithBatch(int64_t micro_batch, int64_t grad_accum_steps) const;

  const OpGraph& graph() const;
  const TrainingConfig& config() const { return config_; }
  const TensorStates& states() const;
  // Whether the op's output aliases an input, so that it runs no kernel (the cost rules'
  // ForwardCost::output_aliases_input, which no micro-batch changes).
  bool OutputAliasesInput(OpId op) const;
  // A tensor's bytes at `micro_batch` (the sizes are kept at micro-batch 1).
  int64_t TensorBytes(TensorId t, int64_t micro_batch) const;
  // The optimizer states of every trainable parameter this rank updates on the device
  // (none when offloaded), each rounded up to `granularity` (a power of two) as the
  // allocator counts it.
  int64_t OptimizerStateBytes(int64_t granularity) const;
  // --activation-offload: the pinned host bytes of the checkpointed blocks' inputs, all
  // packed by the forward's end (save_on_cpu's torch.empty(..., pin_memory=True), which
  // CachingHostAllocator rounds up to a power of two, aten/src/ATen/core/
  // CachingHostAllocator.h allocate). 0 without offload.
  int64_t ActivationOffloadHostBytes(const std::vector<bool>& checkpointed) const;
  // The model state of one unsharded rank: every weight as stored, the gradients of the
  // trainable ones, and their optimizer states and master weights.
  struct ModelState {
    int64_t weights = 0, gradients = 0, optimizer = 0;
  };
  ModelState FullModelState() const;
  // What --offload keeps in CPU RAM on this rank: DeepSpeed's fp32 partition, its
  // gradient, its 16-bit staging copy and the states; FSDP2's shards, sharded gradients
  // and states. 0 without offloading.
  int64_t OffloadCpuBytes() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
  TrainingConfig config_;
};

// `checkpointed[i]` says whether block i is checkpointed; its size must equal the
// number of blocks.
Timeline SimulateSteps(const OpGraph& graph, const TrainingConfig& config,
                       const std::vector<bool>& checkpointed,
                       const SimulationOptions& options = {});
Timeline SimulateSteps(const SimulationTables& tables, const std::vector<bool>& checkpointed,
                       const SimulationOptions& options = {});

}  // namespace headroom
