#include "planner/solve/plan_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>

#include <fmt/format.h>

#include "planner/simulate/caching_allocator_model.h"
#include "planner/simulate/live_bytes.h"
#include "planner/simulate/step_simulator.h"
#include "planner/simulate/step_size_bound.h"
#include "planner/solve/chain_memory_model.h"
#include "planner/solve/checkpoint_solver.h"
#include "planner/solve/simulation_memo.h"

namespace headroom {
namespace {

// The global batch a plan runs: what was asked, unless it does not divide over the ranks
// (the batch note says so).
int64_t SequencesPerStep(const TrainingConfig& c) {
  return c.micro_batch * c.grad_accum_steps * c.parallel.gpus;
}

// Plans as typed back: the searched config with the checkpoint policy naming the plan's
// blocks, on the graph that config runs (options.graph_for), tabulated once for each kind
// of config a search verifies: per precision, checkpointing or not, micro-batch 1 or more.
class TypedPlans {
 public:
  TypedPlans(const OpGraph& graph, const SearchOptions& options)
      : graph_(graph), graph_for_(options.graph_for) {}

  static TrainingConfig Typed(TrainingConfig config, const std::vector<bool>& flags) {
    config.checkpoint = CheckpointPolicy::Of(flags);
    return config;
  }
  const OpGraph& GraphOf(const TrainingConfig& typed) { return *Find(typed).graph; }
  std::shared_ptr<const OpGraph> SharedGraphOf(const TrainingConfig& typed) {
    return graph_for_ ? Find(typed).graph : nullptr;
  }
  SimulationTables TablesOf(const TrainingConfig& typed) {
    return Find(typed).tables.WithBatch(typed.micro_batch, typed.grad_accum_steps);
  }
  // A candidate's own tables, when its plans run the searched graph: tabulated already.
  void Seed(const SimulationTables& tables) {
    if (graph_for_) return;
    const TrainingConfig key = KeyOf(tables.config());
    if (!Lookup(key)) entries_.push_back({key, SearchedGraph(), tables});
  }

 private:
  struct Entry {
    TrainingConfig key;
    std::shared_ptr<const OpGraph> graph;
    SimulationTables tables;
  };
  // What a table or graph depends on beyond the batch sizes (GraphOptionsOf, CostTargetOf):
  // whether anything is checkpointed, and, where each key has its own graph, whether the
  // micro-batch exceeds 1 (GraphOptions::single_sample). The tables of one graph do not
  // depend on the micro-batch.
  TrainingConfig KeyOf(TrainingConfig c) const {
    c.micro_batch = graph_for_ ? std::min<int64_t>(c.micro_batch, 2) : 1;
    c.grad_accum_steps = 1;
    c.checkpoint = CheckpointPolicy{.kind = c.checkpoint.kind == CheckpointPolicy::Kind::kNone
                                                ? CheckpointPolicy::Kind::kNone
                                                : CheckpointPolicy::Kind::kAll};
    return c;
  }
  Entry* Lookup(const TrainingConfig& key) {
    for (Entry& e : entries_)
      if (e.key == key) return &e;
    return nullptr;
  }
  // The graph given, as a non-owning pointer.
  std::shared_ptr<const OpGraph> SearchedGraph() const {
    return std::shared_ptr<const OpGraph>(std::shared_ptr<void>(), &graph_);
  }
  Entry& Find(const TrainingConfig& typed) {
    const TrainingConfig key = KeyOf(typed);
    if (Entry* e = Lookup(key)) return *e;
    std::shared_ptr<const OpGraph> graph = graph_for_ ? graph_for_(key) : SearchedGraph();
    entries_.push_back({key, graph, SimulationTables(*graph, typed)});
    return entries_.back();
  }

  const OpGraph& graph_;
  GraphSource graph_for_;
  std::deque<Entry> entries_;
};

// Step 1. One simulation at micro-batch 1 without checkpointing (two accumulation
// steps, so the second micro-batch runs with every gradient allocated) gives the chain
// profile at any micro-batch. The model counts live bytes only; what the caching
// allocator holds beyond them is measured in step 3, on the plan the model picks.
struct ChainTimeline {
  std::shared_ptr<const Timeline> timeline;  // at micro-batch 1
  int64_t granularity = 1;
  int64_t state_bytes = 0;
};

ChainTimeline Profile(const SimulationTables& tables, const DeviceSpec& device,
                      SimulationMemo* memo) {
  const OpGraph& graph = tables.graph();
  const std::vector<bool> none(graph.blocks().size(), false);
  const SimulationOptions sim{.steps = 1, .cublas_workspace_bytes = device.CublasWorkspaceBytes()};
  ChainTimeline out;
  out.granularity = device.AllocationGranularity();
  out.state_bytes = tables.OptimizerStateBytes(out.granularity);
  const SimulationTables at_one = tables.WithBatch(1, 2);
  auto simulate = [&] { return SimulateSteps(at_one, none, sim); };
  out.timeline =
      memo ? memo->Profile(SimulationMemo::KeyOf(graph, at_one.config(), none, device, false),
                           simulate)
           : std::make_shared<const Timeline>(simulate());
  return out;
}

// Step 2. The checkpoint set for one candidate under a budget in the model's units.
CheckpointSolution Solve(const ChainMemoryModel& model, int64_t budget_units,
                         const SearchOptions& options) {
  const int n = model.num_blocks();
  auto evaluate = [&](std::vector<bool> flags) {
    CheckpointSolution s;
    s.peak_units = model.PeakUnits(flags);
    s.feasible = s.peak_units <= budget_units;
    for (int i = 0; i < n; ++i) s.recompute_cost += flags[i] ? model.recompute_cost[i] : 0.0;
    s.checkpointed = std::move(flags);
    return s;
  };
  if (options.fixed_checkpoint) {
    return evaluate(*options.fixed_checkpoint->Resolve(n));
  }
  if (options.all_or_none) {
    CheckpointSolution none = evaluate(std::vector<bool>(n, false));
    return none.feasible ? none : evaluate(std::vector<bool>(n, true));
  }
  return SolveCheckpoints(model, budget_units);
}

// The peak of the first step's micro-batches (1 and K), before its optimizer step
// allocates the states, against the same budget as PeakAgainstBudget: about half of a
// full prediction's work.
int64_t FirstStepPeak(const SimulationTables& tables, const std::vector<bool>& checkpointed,
                      const DeviceSpec& device, SimulationMemo* memo) {
  auto simulate = [&]() -> int64_t {
    const SimulationOptions sim{.steps = 1,
                                .cublas_workspace_bytes = device.CublasWorkspaceBytes()};
    const Timeline timeline = SimulateSteps(tables, checkpointed, sim);
    const auto optimizer =
        std::find_if(timeline.events.begin(), timeline.events.end(), [&](const MemoryEvent& e) {
          return timeline.phases[e.phase].kind == Phase::Kind::kOptimizerStep;
        });
    const size_t end = static_cast<size_t>(optimizer - timeline.events.begin());
    if (!device.is_cuda) {
      LiveBytes live(timeline, 1);
      ReplayInto(timeline.events, 0, end, live);
      return live.live().peak;
    }
    // No capacity: the peak does not depend on the device's memory (SimulationMemo).
    CachingAllocatorModel allocator;
    ReplayInto(timeline.events, 0, end, allocator);
    return allocator.reserved().peak;
  };
  const int64_t peak =
      memo ? memo->FirstStepPeak(
                 SimulationMemo::KeyOf(tables.graph(), tables.config(), checkpointed, device, true),
                 simulate)
           : simulate();
  return peak + device.ContextBytes();
}

}  // namespace

std::vector<Precision> SupportedPrecisions(const DeviceSpec& device) {
  // A CPU runs fp32 at full rate, and bf16 often far slower (see the step-time model).
  if (!device.is_cuda)
    return {Precision::kFp32, Precision::kBf16, Precision::kAmpBf16, Precision::kMixedBf16};
  if (device.supports_bf16()) return {Precision::kBf16, Precision::kAmpBf16, Precision::kMixedBf16};
  return {Precision::kAmpFp16, Precision::kMixedFp16};
}

int64_t PeakAgainstBudget(const StepPrediction& p, const DeviceSpec& device) {
  return device.PeakAgainstBudget(p.allocated_peak_bytes, p.device_peak_bytes);
}

int64_t UsableBytes(const DeviceSpec& device, double margin) {
  return static_cast<int64_t>(static_cast<double>(device.memory_bytes) * (1.0 - margin));
}

int64_t PerGpuBatch(const SearchOptions& options, std::string* note) {
  int64_t per_gpu = options.global_batch / options.num_gpus;
  if (per_gpu < 1 || per_gpu * options.num_gpus != options.global_batch) {
    per_gpu = std::max<int64_t>(
        1, std::llround(static_cast<double>(options.global_batch) / options.num_gpus));
    if (note) {
      *note = fmt::format(
          "a global batch of {} cannot be split evenly over {} GPUs; planned {} ({} per GPU)",
          options.global_batch, options.num_gpus, per_gpu * options.num_gpus, per_gpu);
    }
  }
  return per_gpu;
}

namespace {

// The micro-batches that divide the per-GPU batch (or the fixed one), smallest first.
std::vector<int64_t> MicroBatchesToTry(const SearchOptions& options, int64_t per_gpu) {
  std::vector<int64_t> micro_batches;
  for (int64_t b = 1; b <= std::min(per_gpu, options.max_micro_batch); ++b) {
    if (per_gpu % b == 0 && (!options.fixed_micro_batch || *options.fixed_micro_batch == b)) {
      micro_batches.push_back(b);
    }
  }
  return micro_batches;
}

std::vector<Precision> PrecisionsToTry(const TrainingConfig& base, const SearchOptions& options) {
  return options.precisions.empty() ? std::vector<Precision>{base.precision} : options.precisions;
}

// Steps 1 and 2 for one precision: profile once, then solve each micro-batch.
void AddCandidatesOfPrecision(const OpGraph& graph, TrainingConfig config, const DeviceSpec& device,
                              const SearchOptions& options,
                              const std::vector<int64_t>& micro_batches,
                              std::vector<PlanCandidate>& candidates) {
  const int64_t allocator_budget = UsableBytes(device, options.margin) - device.ContextBytes();
  const int64_t per_gpu = PerGpuBatch(options, nullptr);
  // One set of tables serves the profile and every micro-batch of this precision.
  const SimulationTables tables(graph, config);
  const ChainTimeline profiles = Profile(tables, device, options.memo.get());
  const ChainProfiler profiler(graph, tables.states(), *profiles.timeline, profiles.granularity,
                               profiles.state_bytes);
  std::vector<MicroBatchOption> micro_batch_options;
  std::vector<CheckpointSolution> solutions;
  std::vector<TrainingConfig> configs;
  std::vector<StepTimeModel> time_models;
  for (int64_t b : micro_batches) {
    // Too large for any device; so is every larger micro-batch.
    if (!WithinStepSizeLimit(graph, {b, config.seq_len})) break;
    config.micro_batch = b;
    config.grad_accum_steps = per_gpu / b;
    StepTimeModel time_model(tables, config, device);
    const StepTime plain = time_model.Estimate({});
    MicroBatchOption o{
        b, ToUnits(profiler.Profile({b, config.seq_len}), time_model.block_forward_seconds()), 0,
        plain.forward_seconds + plain.backward_seconds};
    o.budget_units = allocator_budget / o.model.unit_bytes;
    // Every byte of the model grows with the micro-batch, so once one does not fit no
    // larger one does: stop profiling there.
    CheckpointSolution solution = Solve(o.model, o.budget_units, options);
    if (!solution.feasible) break;
    solutions.push_back(std::move(solution));
    micro_batch_options.push_back(std::move(o));
    configs.push_back(config);
    time_models.push_back(std::move(time_model));
  }
  for (MicroBatchChoice& choice :
       RankSolvedMicroBatches(micro_batch_options, std::move(solutions))) {
    const TrainingConfig& chosen = configs[choice.option];
    PlanCandidate c{tables.WithBatch(chosen.micro_batch, chosen.grad_accum_steps),
                    micro_batch_options[choice.option].model, std::move(choice.solution),
                    time_models[choice.option], StepTime{}};
    c.time = c.time_model->Estimate(c.solution.checkpointed);
    candidates.push_back(std::move(c));
  }
}

// The model's plan leaves out what the allocator holds beyond live bytes. A first step
// alone measures that offset at about half the cost of a full prediction (the model
// counts the optimizer states, which that step does not have yet); the plan re-solved
// with it is usually the one the full verification keeps, so that runs once. Returns
// false when no plan at this micro-batch can fit.
bool CalibrateOnFirstStep(PlanCandidate& c, const DeviceSpec& device, const SearchOptions& options,
                          int64_t usable_bytes) {
  const SimulationTables& tables = c.tables;
  const int64_t states = tables.OptimizerStateBytes(device.AllocationGranularity());
  // The first step's peak, and its offset from the model's peak without the states.
  const auto measure = [&](const CheckpointSolution& plan) {
    const int64_t first_step = FirstStepPeak(tables, plan.checkpointed, device, options.memo.get());
    return std::pair(first_step, first_step - (plan.peak_units * c.model.unit_bytes - states));
  };
  const auto resolve = [&](int64_t offset) {
    return Solve(c.model, (usable_bytes - offset) / c.model.unit_bytes, options);
  };
  auto [first_step, offset] = measure(c.solution);
  CheckpointSolution guess = resolve(offset);
  if (!guess.feasible) {
    // The offset grows with what a plan keeps live (more to fragment), so the model's
    // leanest plan, every block checkpointed, may fit where the first one's offset says
    // nothing does: measure on that plan instead.
    CheckpointSolution leanest = Solve(
        c.model, 0, {.fixed_checkpoint = CheckpointPolicy{.kind = CheckpointPolicy::Kind::kAll}});
    std::tie(first_step, offset) = measure(leanest);
    guess = resolve(offset);
    if (!guess.feasible) {
      // Even the leanest plan misses before its optimizer states exist: no plan at this
      // micro-batch fits.
      if (first_step > usable_bytes) return false;
      guess = std::move(leanest);  // the full verification judges it
      guess.feasible = true;
    }
  }
  c.solution = std::move(guess);
  return true;
}

using VerifiedPlan = std::pair<CheckpointSolution, StepPrediction>;

// Step 3. Verify with the full simulator. The simulator and the chain model differ by an
// offset (allocator rounding and segments, what the model leaves out): measure it on the
// plan just simulated and solve again against the usable memory less that offset, until
// the verified plan is the one the model asks for. Returns the cheapest plan that passed.
std::optional<VerifiedPlan> Verify(PlanCandidate& c, const DeviceSpec& device,
                                   const SearchOptions& options, int64_t usable_bytes,
                                   TypedPlans& typed, int& corrections) {
  constexpr int kMaxAttempts = 6;
  std::optional<VerifiedPlan> best;
  for (int attempt = 0; attempt < kMaxAttempts && c.solution.feasible; ++attempt) {
    const TrainingConfig plan = TypedPlans::Typed(c.config(), c.solution.checkpointed);
    StepPrediction p = PredictStep(typed.TablesOf(plan), c.solution.checkpointed, device);
    const int64_t peak = PeakAgainstBudget(p, device);
    const int64_t offset = peak - c.solution.peak_units * c.model.unit_bytes;
    if (peak <= usable_bytes) {
      if (!best || c.solution.recompute_cost < best->first.recompute_cost)
        best.emplace(c.solution, std::move(p));
    } else {
      ++corrections;
    }
    CheckpointSolution next = Solve(c.model, (usable_bytes - offset) / c.model.unit_bytes, options);
    const bool same = next.checkpointed == c.solution.checkpointed;
    const bool tried = best && next.checkpointed == best->first.checkpointed;
    if (!next.feasible || same || tried ||
        (best && next.recompute_cost >= best->first.recompute_cost))
      break;
    c.solution = std::move(next);
  }
  return best;
}

// No candidate of the model survived verification: the smallest plan there is
// (micro-batch 1, every block checkpointed unless the policy is fixed) may still fit,
// since the model is conservative; otherwise report by how much it misses.
void SmallestPlan(const OpGraph& graph, const TrainingConfig& base, const DeviceSpec& device,
                  const SearchOptions& options, TypedPlans& typed, SearchResult& r) {
  bool smallest_seen = false;
  for (Precision precision : PrecisionsToTry(base, options)) {
    TrainingConfig config = base;
    config.precision = precision;
    config.micro_batch = 1;
    config.grad_accum_steps = PerGpuBatch(options, nullptr);
    const int n = static_cast<int>(graph.blocks().size());
    const std::vector<bool> flags = options.fixed_checkpoint ? *options.fixed_checkpoint->Resolve(n)
                                                             : std::vector<bool>(n, true);
    config.checkpoint = CheckpointPolicy::Of(flags);  // what the stack's recipe reads
    StepPrediction p = PredictStep(typed.TablesOf(config), flags, device);
    const int64_t shortfall = PeakAgainstBudget(p, device) - r.usable_bytes;
    if (!smallest_seen || shortfall < r.shortfall_bytes) {
      smallest_seen = true;
      r.shortfall_bytes = shortfall;
      r.time = StepTimeModel(typed.TablesOf(config), config, device).Estimate(flags);
      r.graph = typed.SharedGraphOf(config);
      r.plan = Plan::WithCheckpointed(config, flags, SequencesPerStep(config));
      r.prediction = std::move(p);
    }
  }
  r.feasible = r.shortfall_bytes <= 0;
  if (r.feasible) r.shortfall_bytes = 0;
}

}  // namespace

std::vector<PlanCandidate> RankCandidates(const OpGraph& graph, const TrainingConfig& base,
                                          const DeviceSpec& device, const SearchOptions& options) {
  const std::vector<int64_t> micro_batches =
      MicroBatchesToTry(options, PerGpuBatch(options, nullptr));
  std::vector<PlanCandidate> candidates;
  for (Precision precision : PrecisionsToTry(base, options)) {
    TrainingConfig config = base;
    config.precision = precision;
    AddCandidatesOfPrecision(graph, config, device, options, micro_batches, candidates);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const PlanCandidate& x, const PlanCandidate& y) {
                     return x.time.tokens_per_second > y.time.tokens_per_second;
                   });
  return candidates;
}

double PlanSpeedBound(const OpGraph& graph, const TrainingConfig& base, const DeviceSpec& device,
                      const SearchOptions& options) {
  const int64_t per_gpu = PerGpuBatch(options, nullptr);
  std::vector<int64_t> micro_batches = MicroBatchesToTry(options, per_gpu);
  micro_batches.push_back(1);  // SmallestPlan's, when no candidate verifies
  const std::vector<bool> none(graph.blocks().size(), false);
  double bound = 0;
  for (Precision precision : PrecisionsToTry(base, options)) {
    TrainingConfig config = base;
    config.precision = precision;
    for (int64_t b : micro_batches) {
      config.micro_batch = b;
      config.grad_accum_steps = per_gpu / b;
      bound =
          std::max(bound, StepTimeModel(graph, config, device).Estimate(none).tokens_per_second);
    }
  }
  return bound;
}

SearchResult SearchPlan(const OpGraph& graph, const TrainingConfig& base, const DeviceSpec& device,
                        const SearchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  SearchResult r;
  r.usable_bytes = UsableBytes(device, options.margin);
  PerGpuBatch(options, &r.batch_note);
  TypedPlans typed(graph, options);
  for (PlanCandidate& c : RankCandidates(graph, base, device, options)) {
    if (c.solution.feasible && !options.fixed_checkpoint &&
        !CalibrateOnFirstStep(c, device, options, r.usable_bytes))
      continue;
    typed.Seed(c.tables);
    std::optional<VerifiedPlan> best =
        Verify(c, device, options, r.usable_bytes, typed, r.corrections);
    if (best) {
      const std::vector<bool>& flags = best->first.checkpointed;
      const TrainingConfig plan = TypedPlans::Typed(c.config(), flags);
      r.feasible = true;
      // Timed as typed too: on the graph the plan runs.
      r.time = StepTimeModel(typed.TablesOf(plan), plan, device).Estimate(flags);
      r.plan = Plan::WithCheckpointed(c.config(), flags, SequencesPerStep(c.config()));
      r.prediction = std::move(best->second);
      r.graph = typed.SharedGraphOf(plan);
      break;
    }
  }
  if (!r.feasible) SmallestPlan(graph, base, device, options, typed, r);
  r.solver_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace headroom
