#include "planner/plan/capacity_sweep.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "planner/core/limits.h"

namespace headroom {
namespace {

constexpr double kSecondsPerHour = 3600;
// Sequence lengths are searched in steps of this many tokens.
constexpr int64_t kSeqLenUnit = 128;

CapacityRow RowOf(const CapacityGpu& gpu, int64_t count, const std::optional<SearchResult>& r,
                  const CapacityJob& job, const PriceCatalog& prices) {
  CapacityRow row;
  row.gpu = gpu.request.device.name;
  row.gpus = count;
  row.usable_bytes = UsableBytes(gpu.request.device, gpu.options.margin);
  if (!r) return row;
  row.solved = true;
  row.fits = r->feasible;
  row.plan = r->plan;
  row.time = r->time;
  row.peak_device_bytes = PeakAgainstBudget(r->prediction, gpu.request.device);
  row.peak_allocated_bytes = r->prediction.allocated_peak_bytes;
  row.breakdown = r->prediction.breakdown;
  row.shortfall_bytes = r->shortfall_bytes;
  row.batch_note = r->batch_note;
  if (!row.fits || row.time.tokens_per_second <= 0) return row;
  row.hours = job.tokens / row.time.tokens_per_second / kSecondsPerHour;
  if (auto hourly = prices.UsdPerGpuHour(row.gpu, job.basis))
    row.cost_usd = row.hours * static_cast<double>(count) * *hourly;
  row.within_limits = (!job.max_hours || row.hours <= *job.max_hours) &&
                      (!job.max_cost_usd || (row.cost_usd && *row.cost_usd <= *job.max_cost_usd));
  return row;
}

// The largest value from `good` (which fits) up to `cap` that fits, to within `unit`:
// doubling until one does not, then halving the gap.
int64_t LargestFitting(int64_t good, int64_t cap, int64_t unit,
                       const std::function<bool(int64_t)>& fits) {
  int64_t bad = cap + 1;
  for (int64_t x = std::max(good * 2, unit); good < cap; x *= 2) {
    const int64_t probe = std::min(x, cap);
    if (!fits(probe)) {
      bad = probe;
      break;
    }
    good = probe;
  }
  while (bad - good > unit) {
    const int64_t mid = good + std::max(unit, (bad - good) / 2 / unit * unit);
    if (mid >= bad) break;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

// The fewest count's plan, with every block checkpointed, at another micro-batch or
// sequence length: does it fit? (The graph is rebuilt: its shape can depend on both.)
class LimitProbe {
 public:
  LimitProbe(const CapacityGpu& gpu, const Plan& plan) : gpu_(gpu), config_(plan.config) {
    config_.grad_accum_steps = 1;
    config_.checkpoint = CheckpointPolicy{.kind = CheckpointPolicy::Kind::kAll};
  }
  bool Fits(int64_t micro_batch, int64_t seq_len) const {
    TrainingConfig c = config_;
    c.micro_batch = micro_batch;
    c.seq_len = seq_len;
    auto graph = BuildGraph(gpu_.request.model, GraphOptionsOf(c));
    if (!graph) return false;
    const std::vector<bool> all(graph->blocks().size(), true);
    const StepPrediction p = PredictStep(*graph, c, all, gpu_.request.device);
    return PeakAgainstBudget(p, gpu_.request.device) <=
           UsableBytes(gpu_.request.device, gpu_.options.margin);
  }

 private:
  const CapacityGpu& gpu_;
  TrainingConfig config_;
};

GpuLimits LimitsOf(const CapacityGpu& gpu, const CapacityRow& fewest) {
  GpuLimits limits{.gpu = fewest.gpu, .gpus = fewest.gpus};
  const LimitProbe probe(gpu, fewest.plan);
  const int64_t seq = gpu.request.config.seq_len;
  const int64_t max_positions =
      gpu.request.model.max_positions > 0 ? gpu.request.model.max_positions : limits::kMaxPositions;
  // Every block checkpointed at micro-batch 1 holds no more than the plan that fit; this
  // only guards the searches below, which start from a length that fits.
  if (!probe.Fits(1, seq)) return limits;
  limits.longest_seq_len =
      LargestFitting(seq, max_positions, kSeqLenUnit, [&](int64_t s) { return probe.Fits(1, s); });
  limits.seq_len_capped = limits.longest_seq_len == max_positions;
  limits.largest_micro_batch =
      LargestFitting(1, kLargestMicroBatchTried, 1, [&](int64_t m) { return probe.Fits(m, seq); });
  return limits;
}

struct TypeResult {
  std::vector<CapacityRow> rows;
  std::optional<GpuLimits> limits;
  std::optional<Error> error;
};

TypeResult SweepType(const CapacityGpu& gpu, const CapacityJob& job, const PriceCatalog& prices) {
  TypeResult out;
  auto graph = BuildGraph(gpu.request.model, GraphOptionsOf(gpu.request.config));
  if (!graph) {
    out.error = graph.error();
    return out;
  }
  const GpuCountSweep sweep = SweepGpuCounts(*graph, gpu.request.config, gpu.request.device,
                                             gpu.options, *gpu.options.gpu_count, true);
  for (const auto& [count, result] : sweep.at)
    out.rows.push_back(RowOf(gpu, count, result, job, prices));
  if (sweep.fewest) {
    auto it = std::find_if(out.rows.begin(), out.rows.end(),
                           [&](const CapacityRow& r) { return r.gpus == *sweep.fewest; });
    out.limits = LimitsOf(gpu, *it);
  }
  return out;
}

// Runs `work(i)` for i in [0, n) on up to two threads (this machine's cores).
void ForEachInParallel(size_t n, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) work(i);
  };
  const size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace

Result<CapacityReport> SweepCapacity(const std::vector<CapacityGpu>& gpus, const CapacityJob& job,
                                     const PriceCatalog& prices, const CapacityProgress& progress) {
  std::vector<TypeResult> results(gpus.size());
  std::mutex progress_mutex;
  size_t done = 0;
  ForEachInParallel(gpus.size(), [&](size_t i) {
    results[i] = SweepType(gpus[i], job, prices);
    const std::lock_guard lock(progress_mutex);
    if (progress) progress(++done, gpus.size());
  });
  CapacityReport report;
  report.job = job;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (results[i].error) return *results[i].error;
    for (CapacityRow& row : results[i].rows) report.rows.push_back(std::move(row));
    if (results[i].limits) report.limits.push_back(*results[i].limits);
    if (!prices.QuoteFor(gpus[i].request.device.name, job.basis))
      report.notes.push_back(fmt::format(
          "{} has no {} price in {}: its cost is not given", gpus[i].request.device.name,
          job.basis == PriceBasis::kCloud ? "cloud" : "purchase", prices.origin));
  }
  FindAnswers(report);
  return report;
}

void FindAnswers(CapacityReport& report) {
  const std::vector<CapacityRow>& rows = report.rows;
  for (const CapacityRow& r : rows) {
    if (!r.fits) continue;
    auto [it, added] = report.min_gpus.emplace(r.gpu, r.gpus);
    if (!added) it->second = std::min(it->second, r.gpus);
  }
  std::vector<size_t> answers;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].answer()) answers.push_back(i);
  for (size_t i : answers) {
    if (!report.fastest || rows[i].hours < rows[*report.fastest].hours) report.fastest = i;
    if (rows[i].cost_usd &&
        (!report.cheapest || *rows[i].cost_usd < *rows[*report.cheapest].cost_usd))
      report.cheapest = i;
  }
  // Pareto front: by increasing time, each configuration cheaper than all faster ones.
  std::vector<size_t> priced;
  for (size_t i : answers)
    if (rows[i].cost_usd) priced.push_back(i);
  std::sort(priced.begin(), priced.end(), [&](size_t a, size_t b) {
    return rows[a].hours != rows[b].hours ? rows[a].hours < rows[b].hours
                                          : *rows[a].cost_usd < *rows[b].cost_usd;
  });
  // A slower configuration joins the front only when it saves at least 0.5%: cents on
  // an estimate are noise, and a front of near-equal costs hides the real choices.
  constexpr double kSameCost = 0.005;
  for (size_t i : priced) {
    if (report.pareto.empty() ||
        *rows[i].cost_usd < *rows[report.pareto.back()].cost_usd * (1 - kSameCost))
      report.pareto.push_back(i);
  }
}

}  // namespace headroom
