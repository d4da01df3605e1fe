#include "planner/plan/capacity_sweep.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/limits.h"
#include "planner/plan/graph_source.h"
#include "planner/solve/simulation_memo.h"

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
  if (!row.fits) return row;
  const std::optional<double> hours = JobHours(job.tokens, row.time.tokens_per_second);
  if (!hours) return row;  // no time, so no cost and not an answer (a note says so)
  row.hours = *hours;
  row.cost_usd = JobCost(row.hours, count, prices.UsdPerGpuHour(row.gpu, job.basis));
  row.within_limits = (!job.max_hours || row.hours <= *job.max_hours) &&
                      (!job.max_cost_usd || (row.cost_usd && *row.cost_usd <= *job.max_cost_usd));
  return row;
}

// A limit searched for: the largest value up to `cap` whose peak fits, to within `unit`.
struct LimitSearch {
  int64_t cap = 0, unit = 1;
  int64_t usable = 0;
  std::function<int64_t(int64_t)> peak_of;  // the peak at a value
};

// From `good` (which fits, at `good_peak`): `cap` if it fits; else the bracket [good, bad)
// narrows until `bad` is the next multiple of `unit` above `good`. A peak grows about
// linearly in the micro-batch and in the sequence length, so each probe goes where the
// line through the bracket's ends meets the budget (a few probes, not a doubling and a
// bisection); a side that moves twice running is halved next, so a curved peak (eager
// attention's) converges as a bisection would.
int64_t LargestFitting(int64_t good, int64_t good_peak, const LimitSearch& s) {
  if (good >= s.cap) return good;
  int64_t bad = s.cap, bad_peak = s.peak_of(s.cap);
  if (bad_peak <= s.usable) return s.cap;
  int same_side = 0;
  bool last_fit = false;
  while (bad - good > s.unit) {
    const int64_t steps = (bad - good - 1) / s.unit;  // grid points strictly inside
    int64_t k = steps / 2 + 1;
    if (same_side < 2 && bad_peak > good_peak) {
      const double at = static_cast<double>(s.usable - good_peak) /
                        static_cast<double>(bad_peak - good_peak) *
                        static_cast<double>(bad - good) / static_cast<double>(s.unit);
      k = std::clamp<int64_t>(static_cast<int64_t>(at), 1, steps);
    }
    const int64_t x = good + k * s.unit;
    const int64_t peak = s.peak_of(x);
    const bool fit = peak <= s.usable;
    same_side = fit == last_fit ? same_side + 1 : 1;
    last_fit = fit;
    (fit ? good : bad) = x;
    (fit ? good_peak : bad_peak) = peak;
  }
  return good;
}

// The fewest count's plan, with every block checkpointed, at another micro-batch or
// sequence length: its peak against the budget. (The graph is rebuilt: its shape can
// depend on both.)
class LimitProbe {
 public:
  LimitProbe(const CapacityGpu& gpu, const Plan& plan) : gpu_(gpu), config_(plan.config) {
    config_.grad_accum_steps = 1;
    config_.checkpoint = CheckpointPolicy{.kind = CheckpointPolicy::Kind::kAll};
  }
  int64_t PeakOf(int64_t micro_batch, int64_t seq_len) const {
    TrainingConfig c = config_;
    c.micro_batch = micro_batch;
    c.seq_len = seq_len;
    auto graph = BuildGraph(gpu_.request.model, GraphOptionsOf(c));
    if (!graph) return std::numeric_limits<int64_t>::max();
    const std::vector<bool> all(graph->blocks().size(), true);
    return PeakAgainstBudget(PredictStep(*graph, c, all, gpu_.request.device), gpu_.request.device);
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
  const int64_t usable = UsableBytes(gpu.request.device, gpu.options.margin);
  // Every block checkpointed at micro-batch 1 holds no more than the plan that fit; this
  // only guards the searches below, which start from a length that fits.
  const int64_t start_peak = probe.PeakOf(1, seq);
  if (start_peak > usable) return limits;
  limits.longest_seq_len = LargestFitting(
      seq, start_peak,
      {max_positions, kSeqLenUnit, usable, [&](int64_t s) { return probe.PeakOf(1, s); }});
  limits.seq_len_capped = limits.longest_seq_len == max_positions;
  limits.largest_micro_batch = LargestFitting(
      1, start_peak,
      {kLargestMicroBatchTried, 1, usable, [&](int64_t m) { return probe.PeakOf(m, seq); }});
  return limits;
}

struct TypeResult {
  std::vector<CapacityRow> rows;
  std::optional<GpuLimits> limits;
};

TypeResult SweepType(const CapacityGpu& gpu, const OpGraph& graph,
                     const std::shared_ptr<SimulationMemo>& memo, const CapacityJob& job,
                     const PriceCatalog& prices) {
  TypeResult out;
  SearchOptions options = gpu.options;
  options.memo = memo;
  if (!options.graph_for) options.graph_for = GraphsOf(gpu.request.model);
  const GpuCountSweep sweep = SweepGpuCounts(graph, gpu.request.config, gpu.request.device, options,
                                             *options.gpu_count, true);
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

// Why rows of one type lack a time or a cost they should have: one note per type and
// reason, naming the counts.
void NoteUnpricedRows(const std::vector<CapacityRow>& rows, const std::string& gpu, bool has_price,
                      std::vector<std::string>& notes) {
  std::vector<int64_t> untimed, uncosted;
  for (const CapacityRow& r : rows) {
    if (r.gpu != gpu || !r.fits) continue;
    if (!r.known_hours())
      untimed.push_back(r.gpus);
    else if (has_price && !r.known_cost())
      uncosted.push_back(r.gpus);
  }
  if (!untimed.empty())
    notes.push_back(fmt::format(
        "{} at {} GPUs: the time estimate is not a positive, finite number of hours: no time "
        "or cost is given, and these are not answers",
        gpu, fmt::join(untimed, ", ")));
  if (!uncosted.empty())
    notes.push_back(fmt::format(
        "{} at {} GPUs: hours x GPUs x price is not a positive, finite number of dollars: "
        "no cost is given",
        gpu, fmt::join(uncosted, ", ")));
}

}  // namespace

std::optional<double> CapacityRow::known_hours() const {
  if (!(hours > 0) || !std::isfinite(hours)) return std::nullopt;
  return hours;
}

std::optional<double> CapacityRow::known_cost() const {
  if (!known_hours() || !cost_usd || !(*cost_usd > 0) || !std::isfinite(*cost_usd))
    return std::nullopt;
  return cost_usd;
}

std::optional<double> JobHours(double tokens, double tokens_per_second) {
  const double hours = tokens / tokens_per_second / kSecondsPerHour;
  if (!(hours > 0) || !std::isfinite(hours)) return std::nullopt;
  return hours;
}

std::optional<double> JobCost(double hours, int64_t gpus, std::optional<double> usd_per_gpu_hour) {
  if (!usd_per_gpu_hour) return std::nullopt;
  const double cost = hours * static_cast<double>(gpus) * *usd_per_gpu_hour;
  if (!(cost > 0) || !std::isfinite(cost)) return std::nullopt;
  return cost;
}

namespace {

// One graph per distinct config, shared by the GPU types that ask for it, so that the
// memo can hand one type's simulations to the next. A type whose graph cannot be had (an
// imported model with no recording for that GPU's precision) gets the reason in `skipped`.
std::vector<std::shared_ptr<const OpGraph>> GraphsOfTypes(
    const std::vector<CapacityGpu>& gpus, std::vector<std::optional<std::string>>& skipped) {
  std::vector<std::shared_ptr<const OpGraph>> graphs(gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = 0; j < i && !graphs[i] && !skipped[i]; ++j) {
      if (!(gpus[j].request.config == gpus[i].request.config)) continue;
      graphs[i] = graphs[j];
      skipped[i] = skipped[j];
    }
    if (graphs[i] || skipped[i]) continue;
    auto graph = BuildGraph(gpus[i].request.model, GraphOptionsOf(gpus[i].request.config));
    if (!graph)
      skipped[i] = graph.error().message;
    else
      graphs[i] = std::make_shared<const OpGraph>(std::move(*graph));
  }
  return graphs;
}

}  // namespace

Result<CapacityReport> SweepCapacity(const std::vector<CapacityGpu>& gpus, const CapacityJob& job,
                                     const PriceCatalog& prices, const CapacityProgress& progress) {
  // A type with no graph is left out with a note; the sweep fails only when every type is.
  std::vector<std::optional<std::string>> skipped(gpus.size());
  const std::vector<std::shared_ptr<const OpGraph>> graphs = GraphsOfTypes(gpus, skipped);
  const auto memo = std::make_shared<SimulationMemo>();
  std::vector<TypeResult> results(gpus.size());
  std::mutex progress_mutex;
  size_t done = 0;
  ForEachInParallel(gpus.size(), [&](size_t i) {
    if (graphs[i]) {
      try {
        results[i] = SweepType(gpus[i], *graphs[i], memo, job, prices);
      } catch (const GraphUnavailable& e) {  // another regime of an imported model
        skipped[i] = e.what();
        results[i] = {};
      }
    }
    const std::lock_guard lock(progress_mutex);
    if (progress) progress(++done, gpus.size());
  });
  if (!gpus.empty() &&
      std::all_of(skipped.begin(), skipped.end(), [](const auto& s) { return s.has_value(); }))
    return MakeError(*skipped.front());
  CapacityReport report;
  report.job = job;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (skipped[i]) {
      report.notes.push_back(
          fmt::format("{} is not planned: {}", gpus[i].request.device.name, *skipped[i]));
      continue;
    }
    for (CapacityRow& row : results[i].rows) report.rows.push_back(std::move(row));
    if (results[i].limits) report.limits.push_back(*results[i].limits);
    const std::string& gpu = gpus[i].request.device.name;
    const bool has_price = prices.QuoteFor(gpu, job.basis) != nullptr;
    if (!has_price)
      report.notes.push_back(fmt::format("{} has no {} price in {}: its cost is not given", gpu,
                                         job.basis == PriceBasis::kCloud ? "cloud" : "purchase",
                                         prices.origin));
    NoteUnpricedRows(report.rows, gpu, has_price, report.notes);
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
    if (rows[i].known_cost() &&
        (!report.cheapest || *rows[i].cost_usd < *rows[*report.cheapest].cost_usd))
      report.cheapest = i;
  }
  // Pareto front: by increasing time, each configuration cheaper than all faster ones.
  std::vector<size_t> priced;
  for (size_t i : answers)
    if (rows[i].known_cost()) priced.push_back(i);
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
