#include "planner/solve/gpu_count_search.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace headroom {
namespace {

struct ModelState {
  double weights = 0, gradients = 0, states = 0;
};

ModelState ModelStateOf(const OpGraph& graph, const TrainingConfig& base) {
  TrainingConfig one = base;
  one.parallel = Parallelism{};
  const SimulationTables::ModelState m = SimulationTables(graph, one).FullModelState();
  return {static_cast<double>(m.weights), static_cast<double>(m.gradients),
          static_cast<double>(m.optimizer)};
}

// A lower bound of a rank's peak under `sharding` over `n` ranks: its share of the model
// state (DDP holds all of it; ZeRO-1 a 1/n share of the states; ZeRO-2 of the states
// and gradients; ZeRO-3 and FSDP of everything).
double LowerBound(const ModelState& m, Sharding sharding, int64_t n) {
  const double share = 1.0 / static_cast<double>(n);
  switch (sharding) {
    case Sharding::kNone:
    case Sharding::kDdp:
      return m.weights + m.gradients + m.states;
    case Sharding::kZero1:
      return m.weights + m.gradients + m.states * share;
    case Sharding::kZero2:
      return m.weights + (m.gradients + m.states) * share;
    case Sharding::kZero3:
    case Sharding::kFsdp:
    case Sharding::kFsdpNoReshard:
      return (m.weights + m.gradients + m.states) * share;
  }
  return 0;
}

SearchResult SolveAt(const OpGraph& graph, const TrainingConfig& base, const DeviceSpec& device,
                     SearchOptions options, const Parallelism& parallel) {
  TrainingConfig config = base;
  config.parallel = parallel;
  config.parallel.deepspeed = base.parallel.deepspeed;
  config.parallel.fsdp_wrap = base.parallel.fsdp_wrap;
  options.num_gpus = static_cast<int>(parallel.gpus);
  options.gpu_count.reset();
  return SearchPlan(graph, config, device, options);
}

}  // namespace

std::vector<int64_t> GpuCountLadder(int64_t max_gpus) {
  std::vector<int64_t> out;
  for (int64_t n = 1; n <= std::min(max_gpus, kGpusPerNode); n *= 2) out.push_back(n);
  for (int64_t n = 2 * kGpusPerNode; n <= max_gpus; n += kGpusPerNode) out.push_back(n);
  return out;
}

Parallelism ParallelismFor(int64_t count, Sharding sharding) {
  Parallelism p;
  p.gpus = count;
  p.nodes = count > kGpusPerNode ? count / kGpusPerNode : 1;
  p.sharding = count > 1 ? sharding : Sharding::kNone;
  return p;
}

SearchResult SearchGpuCount(const OpGraph& graph, const TrainingConfig& base,
                            const DeviceSpec& device, const SearchOptions& options,
                            const GpuCountOptions& counts) {
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&](SearchResult r) {
    r.solver_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  const bool offloading = counts.offload != Offload::kNone;  // needs a sharded scheme
  if (!counts.only_count && !offloading) {
    SearchResult one = SolveAt(graph, base, device, options, ParallelismFor(1, Sharding::kNone));
    if (one.feasible) return finish(std::move(one));
  }
  const std::vector<int64_t> ladder = counts.only_count
                                          ? std::vector<int64_t>{1, *counts.only_count}
                                          : GpuCountLadder(counts.max_gpus);
  const ModelState state = ModelStateOf(graph, base);
  const double usable = static_cast<double>(UsableBytes(device, options.margin));
  // Up the ladder, from the first count whose model-state bound leaves room, each scheme
  // solved until one fits; the fewest ranks win, then the most tokens per second.
  std::optional<SearchResult> best;
  std::optional<SearchResult> closest;  // the last attempt, reported when nothing fits
  for (size_t i = 1; i < ladder.size() && !best; ++i) {
    for (Sharding s : counts.schemes) {
      if (LowerBound(state, s, ladder[i]) > usable) continue;
      Parallelism parallel = ParallelismFor(ladder[i], s);
      parallel.offload = counts.offload;
      if (ValidateParallelism(parallel)) continue;  // --offload with a scheme that cannot
      if (counts.only_count) parallel.nodes = counts.only_count_nodes;
      SearchResult r = SolveAt(graph, base, device, options, parallel);
      if (r.feasible && (!best || r.time.tokens_per_second > best->time.tokens_per_second)) {
        best = std::move(r);
      } else if (!r.feasible) {
        closest = std::move(r);
      }
    }
  }
  if (best) return finish(std::move(*best));
  if (closest) return finish(std::move(*closest));
  Parallelism last = ParallelismFor(ladder.back(), counts.schemes.back());
  if (!ValidateParallelism(
          {.gpus = last.gpus, .sharding = last.sharding, .offload = counts.offload}))
    last.offload = counts.offload;
  return finish(SolveAt(graph, base, device, options, last));
}

}  // namespace headroom
