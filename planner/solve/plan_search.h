// The search for the fastest plan that fits: micro-batch size (with the accumulation
// that keeps the global batch exact), which blocks to checkpoint (optimal in the chain
// memory model, see checkpoint_solver.h) and, when asked, precision. The objective is
// predicted tokens per second; every plan returned has been verified by the full
// simulator against the budget less the safety margin; where the solver's model and the
// simulator disagree, the budget is moved by the measured difference and the solve
// repeated.
#pragma once

#include "planner/solve/layer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/gpu_catalog.h"
#include "planner/core/plan.h"
#include "planner/core/training_config.h"
#include "planner/graph/op_graph.h"
#include "planner/simulate/step_prediction.h"
#include "planner/simulate/step_simulator.h"
#include "planner/solve/chain_memory_model.h"
#include "planner/solve/checkpoint_solver.h"
#include "planner/solve/step_time_model.h"

namespace headroom {

class SimulationMemo;

// Keeps this fraction of device memory free; covers CUDA context variation between
// drivers and fragmentation over a long run that two replayed steps do not show.
inline constexpr double kDefaultMargin = 0.05;

// `--gpus auto` (gpu_count_search.h).
struct GpuCountOptions {
  int64_t max_gpus = 1024;
  // `--gpus N` without --sharding: the count is fixed, the scheme is chosen.
  std::optional<int64_t> only_count;
  int64_t only_count_nodes = 1;
  // The schemes to consider beyond one rank; the order breaks ties in speed.
  std::vector<Sharding> schemes = {Sharding::kDdp, Sharding::kZero1, Sharding::kFsdpNoReshard,
                                   Sharding::kFsdp};
  // --offload: applied to each scheme that can (the single rank, which cannot, is skipped).
  Offload offload = Offload::kNone;
};

// The graph a configuration runs. What transformers executes follows the config: a KV
// cache without checkpointing, copied head views above micro-batch 1, the attention
// kernel of the precision (models/layer_builder.h, GraphOptionsOf). The search ranks its
// candidates on the graph it is given and verifies each on the graph its plan runs, so
// that a plan typed back as flags predicts exactly what the search reported.
using GraphSource = std::function<std::shared_ptr<const OpGraph>(const TrainingConfig&)>;

struct SearchOptions {
  int64_t global_batch = 8;  // sequences per optimizer step, over all GPUs
  // The user stated the global batch (--global-batch): a GPU count that does not divide
  // it is never chosen, and when none that does fits the search says which batches would.
  // Unset, a count may round it to whole sequences per GPU (and a note says so).
  bool exact_global_batch = false;
  int num_gpus = 1;  // data-parallel replicas
  double margin = kDefaultMargin;
  // Precisions to consider; empty means the config's precision only.
  std::vector<Precision> precisions;
  // When set, the checkpoint policy is fixed and only the micro-batch is searched.
  std::optional<CheckpointPolicy> fixed_checkpoint;
  // Restrict to checkpointing all blocks or none (what Hugging Face can express).
  bool all_or_none = false;
  int64_t max_micro_batch = 64;
  // When set, only this micro-batch is considered (the user stated it).
  std::optional<int64_t> fixed_micro_batch;
  // When set, the number of ranks and the sharding are searched too.
  std::optional<GpuCountOptions> gpu_count;
  // When set, simulations that do not depend on the device's memory are shared with the
  // other searches given the same memo (`headroom capacity`'s GPU types).
  std::shared_ptr<SimulationMemo> memo;
  // Unset: every plan is verified on the graph given (a graph built by hand).
  GraphSource graph_for;
};

struct SearchResult {
  bool feasible = false;
  Plan plan;                  // the chosen micro-batch, accumulation, precision and checkpoint set
  StepPrediction prediction;  // the full simulation of the chosen plan (or of the
                              // smallest plan tried, when nothing fits)
  std::shared_ptr<const OpGraph> graph;  // the graph `prediction` ran on (graph_for's)
  StepTime time;
  int64_t usable_bytes = 0;     // device memory x (1 - margin)
  int64_t shortfall_bytes = 0;  // when infeasible: least device peak - usable
  int corrections = 0;          // verified plans that missed, each followed by a tighter solve
  double solver_seconds = 0;
  std::string batch_note;    // set when the global batch could not be met exactly
  std::string schemes_note;  // set when a scheme asked for was not tried (not modelled)
};

// A (precision, micro-batch) the chain model says fits, with its optimal checkpoint set
// and time estimate; not yet verified by the simulator. Its tables refer to the graph
// the candidates were ranked for, which must outlive them.
struct PlanCandidate {
  SimulationTables tables;  // of this precision, at this micro-batch and accumulation
  ChainMemoryModel model;
  CheckpointSolution solution;
  std::optional<StepTimeModel> time_model;  // prices other checkpoint sets at this micro-batch
  StepTime time;

  const TrainingConfig& config() const { return tables.config(); }
};

// Steps 1-2 of the search alone (profiling, the checkpoint DP for every micro-batch and
// precision), fastest first. SearchPlan adds step 3, verification.
std::vector<PlanCandidate> RankCandidates(const OpGraph& graph, const TrainingConfig& base,
                                          const DeviceSpec& device, const SearchOptions& options);

SearchResult SearchPlan(const OpGraph& graph, const TrainingConfig& base, const DeviceSpec& device,
                        const SearchOptions& options);

// No plan SearchPlan can return runs faster than this many tokens/s: the fastest
// precision and micro-batch with nothing recomputed (recomputation only adds time, see
// StepTimeModel::Estimate), found without simulating anything.
double PlanSpeedBound(const OpGraph& graph, const TrainingConfig& base, const DeviceSpec& device,
                      const SearchOptions& options);

// Precisions a device can run, fastest-first: bf16 regimes where supported, else fp16.
std::vector<Precision> SupportedPrecisions(const DeviceSpec& device);

// What the search holds plans to, shared with the advice for infeasible requests so that
// the two agree:
// The memory a plan may use: all of the device's but the margin.
int64_t UsableBytes(const DeviceSpec& device, double margin);
// Sequences per GPU per optimizer step: the global batch over the GPUs, to the nearest
// when it does not divide (then `note`, when given, says so).
int64_t PerGpuBatch(const SearchOptions& options, std::string* note = nullptr);
// The peak held against that memory: the device's (allocator slack and CUDA context
// included) on a GPU, the live bytes on the CPU.
int64_t PeakAgainstBudget(const StepPrediction& p, const DeviceSpec& device);

}  // namespace headroom
