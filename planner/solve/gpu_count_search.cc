#include "planner/solve/gpu_count_search.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace headroom {
namespace {

// Whether the leanest plan of `config` (micro-batch 1, every block checkpointed unless
// the checkpoint set is fixed) fits on one rank: no plan at this count fits otherwise.
bool SmallestPlanFits(const OpGraph& graph, TrainingConfig config, const DeviceSpec& device,
                      const SearchOptions& options) {
  SearchOptions per_count = options;
  per_count.num_gpus = static_cast<int>(config.parallel.gpus);
  config.micro_batch = 1;
  config.grad_accum_steps = PerGpuBatch(per_count, nullptr);
  const int n = static_cast<int>(graph.blocks().size());
  const std::vector<bool> flags = options.fixed_checkpoint ? *options.fixed_checkpoint->Resolve(n)
                                                           : std::vector<bool>(n, true);
  const StepPrediction p = PredictStep(graph, config, flags, device);
  return PeakAgainstBudget(p, device) <= UsableBytes(device, options.margin);
}

// The first count of `ladder` at which the scheme's smallest plan fits; memory per rank
// falls with the count when states are sharded, so bisect; DDP holds everything on
// every rank, so its answer is the same at every count past one.
std::optional<int64_t> FewestFitting(const OpGraph& graph, const TrainingConfig& base,
                                     const DeviceSpec& device, const SearchOptions& options,
                                     const std::vector<int64_t>& ladder, Sharding sharding) {
  auto fits = [&](size_t i) {
    TrainingConfig config = base;
    config.parallel = ParallelismFor(ladder[i], sharding);
    return SmallestPlanFits(graph, config, device, options);
  };
  if (ladder.size() < 2) return std::nullopt;
  if (sharding == Sharding::kDdp) return fits(1) ? std::optional(ladder[1]) : std::nullopt;
  size_t lo = 1, hi = ladder.size() - 1;
  if (!fits(hi)) return std::nullopt;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (fits(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return ladder[lo];
}

SearchResult SolveAt(const OpGraph& graph, const TrainingConfig& base, const DeviceSpec& device,
                     SearchOptions options, const Parallelism& parallel) {
  TrainingConfig config = base;
  config.parallel = parallel;
  options.num_gpus = static_cast<int>(parallel.gpus);
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
  const std::vector<int64_t> ladder = GpuCountLadder(counts.max_gpus);
  auto finish = [&](SearchResult r) {
    r.solver_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  SearchResult one = SolveAt(graph, base, device, options, ParallelismFor(1, Sharding::kNone));
  if (one.feasible) return finish(std::move(one));
  // The fewest ranks of each scheme, then the fastest plan at the fewest of all.
  std::vector<std::pair<int64_t, Sharding>> fewest;
  for (Sharding s : counts.schemes) {
    if (auto n = FewestFitting(graph, base, device, options, ladder, s)) fewest.emplace_back(*n, s);
  }
  if (fewest.empty()) {
    const Sharding leanest = counts.schemes.back();
    return finish(SolveAt(graph, base, device, options,
                          ParallelismFor(ladder.back(), leanest)));
  }
  const int64_t n = std::min_element(fewest.begin(), fewest.end())->first;
  std::optional<SearchResult> best;
  for (const auto& [count, sharding] : fewest) {
    if (count != n) continue;
    SearchResult r = SolveAt(graph, base, device, options, ParallelismFor(n, sharding));
    if (r.feasible && (!best || r.time.tokens_per_second > best->time.tokens_per_second))
      best = std::move(r);
  }
  return finish(best ? std::move(*best)
                     : SolveAt(graph, base, device, options,
                               ParallelismFor(n, fewest.front().second)));
}

}  // namespace headroom
