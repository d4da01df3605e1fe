// Optimal checkpoint placement on a chain of blocks under a memory budget: the set of
// blocks to checkpoint that minimizes recomputation time subject to the chain memory
// model's peak <= budget. A dynamic program over blocks in order whose state is the
// memory already saved by earlier checkpoints (in the model's integer units), keeping
// only the Pareto front of (saving, cost): exact in that model, O(blocks x front). The one-level setting is what the runtime executes:
// each block is either stored or recomputed once from its input.
#pragma once

#include "planner/solve/layer.h"

#include <cstdint>
#include <functional>
#include <vector>

#include "planner/solve/chain_memory_model.h"

namespace headroom {

struct CheckpointSolution {
  bool feasible = false;
  std::vector<bool> checkpointed;
  double recompute_cost = 0;
  int64_t peak_units = 0;
};

CheckpointSolution SolveCheckpoints(const ChainMemoryModel& model, int64_t budget_units);

// One micro-batch size the search may pick: its chain model, its budget in that model's
// units, and the seconds per micro-batch of forward + backward without recomputation.
struct MicroBatchOption {
  int64_t micro_batch = 1;
  ChainMemoryModel model;
  int64_t budget_units = 0;
  double base_seconds = 0;
};

struct MicroBatchChoice {
  int option = -1;  // index into the options
  CheckpointSolution solution;
  double seconds_per_sample = 0;  // (base_seconds + recompute) / micro_batch
};

using ChainSolver =
    std::function<CheckpointSolution(const ChainMemoryModel&, int64_t budget_units)>;

// Solves every option (with SolveCheckpoints unless a constrained solver is given) and
// returns the feasible ones, least time per sample first. For one precision and a fixed
// global batch this is the tokens-per-second order: the optimizer step costs the same.
std::vector<MicroBatchChoice> RankMicroBatches(const std::vector<MicroBatchOption>& options,
                                               const ChainSolver& solve = SolveCheckpoints);
// The same ranking of options already solved (solutions[k] belongs to options[k]).
std::vector<MicroBatchChoice> RankSolvedMicroBatches(const std::vector<MicroBatchOption>& options,
                                                     std::vector<CheckpointSolution> solutions);

}  // namespace headroom
