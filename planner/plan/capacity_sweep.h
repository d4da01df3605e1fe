// `headroom capacity`: for each GPU type and count, the plan `plan --gpus N` would
// choose (the same solver, SweepGpuCounts), its speed and the cost of a job of a given
// number of tokens; then the answers a buyer asks for: the fewest GPUs of each type, the
// cheapest and the fastest configurations, the time-against-cost Pareto front, and the
// longest sequence and largest micro-batch each type holds.
#pragma once

#include "planner/plan/layer.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/price_catalog.h"
#include "planner/plan/plan_request.h"
#include "planner/solve/gpu_count_search.h"

namespace headroom {

// One GPU type as `plan --gpus auto` would be asked about it.
struct CapacityGpu {
  PlanRequest request;    // its device, and the config's precision and kernels for it
  SearchOptions options;  // gpu_count set (the schemes and the most GPUs to try)
};

struct CapacityJob {
  double tokens = 0;  // trained over the whole job (dataset tokens x epochs)
  PriceBasis basis = PriceBasis::kCloud;
  std::optional<double> max_hours;  // configurations over either limit are not answers
  std::optional<double> max_cost_usd;
};

// A configuration: one GPU type at one count.
struct CapacityRow {
  std::string gpu;
  int64_t gpus = 0;
  bool solved = false;  // false: the model state alone leaves no room at this count
  bool fits = false;
  Plan plan;  // when solved: the plan that fits, or the smallest tried
  StepTime time;
  int64_t peak_device_bytes = 0;     // per GPU, the busiest rank's
  int64_t peak_allocated_bytes = 0;  // live tensors at that peak
  CategoryBytes breakdown{};         // of the allocated peak
  int64_t usable_bytes = 0;
  int64_t shortfall_bytes = 0;     // when solved and not fitting
  std::string batch_note;          // when the global batch does not divide over the GPUs
  double hours = 0;                // wall-clock for the job; 0 when the estimate gave none
  std::optional<double> cost_usd;  // none when the price file has no price for the GPU
  bool within_limits = true;       // --max-hours and --max-cost

  // The hours and the cost as every output shows them and the answers use them: none
  // unless positive and finite, whoever filled the row, so that the text, JSON, CSV and
  // HTML agree (an infinite cost would print as $inf in one and null in another).
  std::optional<double> known_hours() const;
  std::optional<double> known_cost() const;
  bool answer() const { return fits && within_limits && known_hours(); }
};

// What a GPU type holds at its fewest count (that count's sharding and precision, every
// block checkpointed): the longest sequence at micro-batch 1, the largest micro-batch at
// the requested sequence length.
struct GpuLimits {
  std::string gpu;
  int64_t gpus = 0;
  int64_t longest_seq_len = 0;      // 0: none fits; capped by the model's positions
  bool seq_len_capped = false;      // the model's limit, not memory, stopped the search
  int64_t largest_micro_batch = 0;  // capped at kLargestMicroBatchTried
};

inline constexpr int64_t kLargestMicroBatchTried = 1024;

struct CapacityReport {
  CapacityJob job;
  std::vector<CapacityRow> rows;            // by GPU type (the order given), then count
  std::map<std::string, int64_t> min_gpus;  // types that fit at some count
  std::optional<size_t> cheapest, fastest;  // indices into rows, among answers
  std::vector<size_t> pareto;               // priced answers no faster one beats on cost by 0.5% or
                                            // more, by increasing time
  std::vector<GpuLimits> limits;
  std::vector<std::string> notes;  // e.g. GPUs with no price
};

// The job's wall-clock hours at `tokens_per_second`; none unless positive and finite.
std::optional<double> JobHours(double tokens, double tokens_per_second);
// What `gpus` GPUs cost over `hours` at `usd_per_gpu_hour`; none without a price, or when
// the product is not a positive, finite number of dollars.
std::optional<double> JobCost(double hours, int64_t gpus, std::optional<double> usd_per_gpu_hour);

// Reports (types done, types in all) as each GPU type finishes.
using CapacityProgress = std::function<void(size_t, size_t)>;

// Builds each type's graph and sweeps its counts, two types at a time.
Result<CapacityReport> SweepCapacity(const std::vector<CapacityGpu>& gpus, const CapacityJob& job,
                                     const PriceCatalog& prices,
                                     const CapacityProgress& progress = {});

// The answers of a report whose rows are filled: min_gpus, cheapest, fastest, pareto.
void FindAnswers(CapacityReport& report);

}  // namespace headroom
