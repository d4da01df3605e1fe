#include "planner/solve/gpu_count_search.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// The request and search options of one count and scheme.
std::pair<TrainingConfig, SearchOptions> At(const TrainingConfig& base, SearchOptions options,
                                            const Parallelism& parallel) {
  TrainingConfig config = base;
  config.parallel = parallel;
  config.parallel.deepspeed = base.parallel.deepspeed;
  config.parallel.fsdp_wrap = base.parallel.fsdp_wrap;
  if (parallel.fsdp()) {  // the policy the stack's FSDP2 runs with
    config.parallel.fsdp_param_dtype = base.parallel.fsdp_param_dtype;
    config.parallel.fsdp_reduce_dtype = base.parallel.fsdp_reduce_dtype;
  }
  options.num_gpus = static_cast<int>(parallel.gpus);
  options.gpu_count.reset();
  return {config, options};
}

SearchResult SolveAt(const OpGraph& graph, const TrainingConfig& base, const DeviceSpec& device,
                     const SearchOptions& options, const Parallelism& parallel) {
  const auto [config, at] = At(base, options, parallel);
  return SearchPlan(graph, config, device, at);
}

double SpeedBoundAt(const OpGraph& graph, const TrainingConfig& base, const DeviceSpec& device,
                    const SearchOptions& options, const Parallelism& parallel) {
  const auto [config, at] = At(base, options, parallel);
  return PlanSpeedBound(graph, config, device, at);
}

}  // namespace

std::vector<int64_t> GpuCountLadder(int64_t max_gpus) {
  std::vector<int64_t> out;
  for (int64_t n = 1; n <= std::min(max_gpus, kGpusPerNode); n *= 2) out.push_back(n);
  for (int64_t n = 2 * kGpusPerNode; n <= max_gpus;) {
    out.push_back(n);
    n += n < 1024 ? kGpusPerNode : n < 8192 ? 8 * kGpusPerNode : 64 * kGpusPerNode;
  }
  return out;
}

Parallelism ParallelismFor(int64_t count, Sharding sharding) {
  Parallelism p;
  p.gpus = count;
  p.nodes = DefaultNodes(count);
  p.sharding = count > 1 ? sharding : Sharding::kNone;
  return p;
}

namespace {

// What every count's solve shares: the model state and the budget it is bounded against.
struct CountSolver {
  const OpGraph& graph;
  const TrainingConfig& base;
  const DeviceSpec& device;
  const SearchOptions& options;
  const GpuCountOptions& counts;
  ModelState state = ModelStateOf(graph, base);
  double usable = static_cast<double>(UsableBytes(device, options.margin));

  std::optional<SearchResult> Solve(int64_t count, std::optional<int64_t> nodes = {}) const {
    const std::vector<Sharding> schemes =
        count == 1 ? std::vector<Sharding>{Sharding::kNone} : LeanestFirst(counts.schemes);
    std::optional<SearchResult> best, closest;
    size_t best_rank = 0;
    for (Sharding s : schemes) {
      if (LowerBound(state, s, count) > usable) continue;
      Parallelism parallel = ParallelismFor(count, s);
      parallel.offload = counts.offload;
      if (ValidateParallelism(parallel)) continue;  // --offload with a scheme that cannot
      if (!Modelled(parallel)) continue;            // e.g. QLoRA under FSDP2
      if (nodes) parallel.nodes = *nodes;
      // Ties in speed go to the scheme listed first.
      const size_t rank =
          std::find(counts.schemes.begin(), counts.schemes.end(), s) - counts.schemes.begin();
      // A scheme that cannot beat the best plan found needs no solving: its plans are
      // no faster than its bound.
      if (best) {
        const double bound = SpeedBoundAt(graph, base, device, options, parallel);
        const double to_beat = best->time.tokens_per_second;
        if (bound < to_beat || (bound == to_beat && rank > best_rank)) continue;
      }
      SearchResult r = SolveAt(graph, base, device, options, parallel);
      if (r.feasible &&
          (!best || r.time.tokens_per_second > best->time.tokens_per_second ||
           (r.time.tokens_per_second == best->time.tokens_per_second && rank < best_rank))) {
        best = std::move(r);
        best_rank = rank;
      } else if (!r.feasible) {
        closest = std::move(r);
        // Every other scheme holds at least what a fully sharded one does: none fits.
        if (IsFullySharded(s)) break;
      }
    }
    return best ? std::move(best) : std::move(closest);
  }

  bool Modelled(const Parallelism& parallel) const {
    TrainingConfig config = base;
    config.parallel = parallel;
    return !UnmodelledScheme(config);
  }

  static bool IsFullySharded(Sharding s) { return s == Sharding::kFsdp || s == Sharding::kZero3; }
  // The fully sharded schemes first: when they do not fit, nothing else is solved.
  static std::vector<Sharding> LeanestFirst(std::vector<Sharding> schemes) {
    std::stable_partition(schemes.begin(), schemes.end(), IsFullySharded);
    return schemes;
  }
};

bool Fits(const std::optional<SearchResult>& r) { return r && r->feasible; }

// The schemes the search left out because the simulator does not replay them for this
// fine-tune, and why; empty when it tried them all.
std::string UnmodelledSchemesNote(const TrainingConfig& base,
                                  const std::vector<Sharding>& schemes) {
  std::string names, why;
  for (Sharding s : schemes) {
    TrainingConfig config = base;
    config.parallel = ParallelismFor(2, s);
    const std::optional<Error> error = UnmodelledScheme(config);
    if (!error) continue;
    names += (names.empty() ? "" : ", ") + std::string(ShardingName(s));
    if (why.empty()) why = error->message;
  }
  if (names.empty()) return "";
  return fmt::format("not tried: {} ({})", names, why.substr(0, why.find(';')));
}

// Whether `count` ranks can run the global batch in whole sequences per rank, when it
// must be kept exactly.
bool KeepsGlobalBatch(const SearchOptions& options, int64_t count) {
  return !options.exact_global_batch || options.global_batch % count == 0;
}

}  // namespace

GpuCountSweep SweepGpuCounts(const OpGraph& graph, const TrainingConfig& base,
                             const DeviceSpec& device, const SearchOptions& options,
                             const GpuCountOptions& counts, bool every_count) {
  const CountSolver solver{graph, base, device, options, counts};
  std::vector<int64_t> ladder = GpuCountLadder(counts.max_gpus);
  std::erase_if(ladder, [&](int64_t n) { return !KeepsGlobalBatch(options, n); });
  GpuCountSweep sweep;
  auto fits = [&](int64_t n) { return Fits(sweep.at[n] = solver.Solve(n)); };
  size_t i = 0;
  while (i < ladder.size() && !fits(ladder[i])) ++i;
  if (i == ladder.size()) return sweep;
  sweep.fewest = ladder[i];
  // Within a node any count will do: down from the rung that fits to the one that did not.
  if (i > 0 && ladder[i] <= kGpusPerNode) {
    for (int64_t n = ladder[i] - 1; n > ladder[i - 1]; --n) {
      if (!KeepsGlobalBatch(options, n)) continue;
      if (!fits(n)) break;
      sweep.fewest = n;
    }
  }
  if (every_count) {
    for (size_t j = i + 1; j < ladder.size(); ++j) sweep.at[ladder[j]] = solver.Solve(ladder[j]);
  }
  return sweep;
}

std::string NearestGlobalBatchesNote(const OpGraph& graph, const TrainingConfig& base,
                                     const DeviceSpec& device, SearchOptions options,
                                     const GpuCountOptions& counts) {
  const int64_t asked = options.global_batch;
  options.exact_global_batch = false;
  const GpuCountSweep any = SweepGpuCounts(graph, base, device, options, counts, false);
  if (!any.fewest) return "";
  std::optional<std::pair<int64_t, int64_t>> below, above;  // (batch, count)
  for (int64_t n : GpuCountLadder(counts.max_gpus)) {
    if (n < *any.fewest) continue;
    const int64_t down = asked / n * n, up = (asked + n - 1) / n * n;
    if (down >= n && (!below || down > below->first)) below = {{down, n}};
    if (!above || up < above->first) above = {{up, n}};
  }
  std::vector<std::string> works;
  for (const auto& b : {below, above}) {
    if (!b) continue;
    options.global_batch = b->first;
    options.exact_global_batch = true;
    GpuCountOptions at = counts;
    at.only_count = b->second;
    at.only_count_nodes = DefaultNodes(b->second);
    if (!SearchGpuCount(graph, base, device, options, at).feasible) continue;
    works.push_back(fmt::format("{} ({} GPUs x {})", b->first, b->second, b->first / b->second));
  }
  if (works.empty()) return "";
  return fmt::format(
      "no GPU count up to {} that divides the global batch {} fits; the nearest that do: {}",
      counts.max_gpus, asked, fmt::join(works, " or "));
}

SearchResult SearchGpuCount(const OpGraph& graph, const TrainingConfig& base,
                            const DeviceSpec& device, const SearchOptions& options,
                            const GpuCountOptions& counts) {
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&](SearchResult r) {
    r.schemes_note = UnmodelledSchemesNote(base, counts.schemes);
    r.solver_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  std::optional<SearchResult> found;
  if (counts.only_count) {
    found = CountSolver{graph, base, device, options, counts}.Solve(*counts.only_count,
                                                                    counts.only_count_nodes);
  } else {
    GpuCountSweep sweep = SweepGpuCounts(graph, base, device, options, counts, false);
    if (sweep.fewest) return finish(std::move(*sweep.at[*sweep.fewest]));
    // Nothing fits: the attempt at the most ranks solved comes closest.
    for (auto it = sweep.at.rbegin(); it != sweep.at.rend() && !found; ++it) found = it->second;
  }
  if (found) return finish(std::move(*found));
  // The most ranks that keep the global batch (one rank always does).
  int64_t max_count = 1;
  for (int64_t n : GpuCountLadder(counts.max_gpus))
    if (KeepsGlobalBatch(options, n)) max_count = n;
  if (counts.only_count) max_count = *counts.only_count;
  // Nothing was solved: the last scheme listed that is modelled for this fine-tune, with
  // the offload asked for where the scheme takes it.
  Parallelism last = ParallelismFor(max_count, counts.schemes.back());
  for (auto s = counts.schemes.rbegin(); s != counts.schemes.rend(); ++s) {
    TrainingConfig config = base;
    config.parallel = ParallelismFor(max_count, *s);
    if (UnmodelledScheme(config)) continue;
    last = config.parallel;
    break;
  }
  if (!ValidateParallelism(
          {.gpus = last.gpus, .sharding = last.sharding, .offload = counts.offload}))
    last.offload = counts.offload;
  return finish(SolveAt(graph, base, device, options, last));
}

}  // namespace headroom
