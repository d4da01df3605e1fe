// The solver's memory model of a model's chain of blocks at one micro-batch size,
// measured from a simulation without checkpointing. With C the checkpointed blocks and
// d_j = stored_j - kept_j the bytes checkpointing block j saves:
//
//   peak(C) = max( fixed_peak,                              embedding, optimizer, setup
//                  head_peak - sum_{j in C} d_j,            LM head and loss
//                  max_i block_peak_i - sum_{j<i, j in C} d_j + [i in C] e_i )
//
// (a checkpointed block keeps only its output for the next block; while it is recomputed
// in backward, e_i is live on top of its peak: the recomputed output, and the output's
// gradient where the block's last op does not pass it on).
#pragma once

#include "planner/solve/layer.h"

#include <cstdint>
#include <vector>

#include "planner/simulate/granularity.h"
#include "planner/simulate/memory_timeline.h"
#include "planner/graph/op_graph.h"
#include "planner/simulate/tensor_states.h"

namespace headroom {

struct ChainProfile {  // bytes
  int64_t fixed_peak = 0;
  int64_t head_peak = 0;
  std::vector<int64_t> block_peak;
  std::vector<int64_t> stored;     // kept from a block's forward to its backward
  std::vector<int64_t> kept;       // its output: what remains when it is checkpointed
  std::vector<int64_t> grad_held;  // its output's gradient, where its backward holds it
  // What its recomputation holds through its backward: kept + grad_held when reentrant,
  // nothing for torch.utils.checkpoint(use_reentrant=False).
  std::vector<int64_t> recompute_held;
};

// Reads the profile at any micro-batch off a timeline simulated at micro-batch 1 with no
// block checkpointed (the event sequence does not depend on the micro-batch; sizes that
// do scale by it), rounded up to `granularity` as the device's allocator counts them. A
// one-step timeline stands for the steady state when `state_bytes` (the optimizer
// states, which later steps start with) is added outside the optimizer step.
// `states` are the graph's tensor states under the timeline's precision. The timeline is
// read once; each micro-batch is then one pass over a compact copy of its events.
class ChainProfiler {
 public:
  ChainProfiler(const OpGraph& graph, const TensorStates& states, const Timeline& timeline,
                int64_t granularity, int64_t state_bytes = 0);
  ChainProfile Profile(const ShapeEnv& env) const;

 private:
  // Where an event's live bytes count: 0 the fixed part, 1 the head, 2 + i block i.
  static constexpr int32_t kFixed = 0, kHead = 1, kFirstBlock = 2;
  struct Event {
    int64_t bytes;  // at micro-batch 1
    int32_t region;
    bool alloc;
    bool per_sample;
    bool optimizer;  // the optimizer step or zero_grad: the states are already live
  };
  struct StoredBuffer {  // live from a block's forward when the first backward starts
    int block;
    int64_t bytes;
    bool per_sample;
  };
  int64_t RoundUp(int64_t bytes) const { return granularity_.RoundUp(bytes); }

  const OpGraph& graph_;
  const TensorStates& states_;
  Granularity granularity_;
  int64_t state_bytes_;
  std::vector<Event> events_;
  std::vector<StoredBuffer> stored_;
  std::vector<bool> grad_passed_on_;  // per block: its last op passes the output gradient on
};

// One profile at `env.micro_batch` (see ChainProfiler).
ChainProfile ProfileChain(const OpGraph& graph, const TensorStates& states,
                          const Timeline& timeline, const ShapeEnv& env, int64_t granularity,
                          int64_t state_bytes = 0);

// The model in integer units, which is what the solver optimizes exactly.
struct ChainMemoryModel {
  int64_t unit_bytes = 1;
  int64_t fixed_peak = 0;
  int64_t head_peak = 0;
  std::vector<int64_t> block_peak;
  std::vector<int64_t> saved;            // d_i, rounded down (never overstates a saving)
  std::vector<int64_t> recompute_extra;  // e_i = recompute_held_i
  std::vector<double> recompute_cost;    // seconds to recompute each block

  int num_blocks() const { return static_cast<int>(block_peak.size()); }
  int64_t PeakUnits(const std::vector<bool>& checkpointed) const;
};

// Units of about 1/4096 of the total saving (at least one byte), so the solver's
// dynamic program has at most a few thousand states per block.
ChainMemoryModel ToUnits(const ChainProfile& profile, const std::vector<double>& recompute_cost);

}  // namespace headroom
