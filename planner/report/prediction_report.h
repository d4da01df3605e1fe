// Presenting a StepPrediction: the human-readable report of `headroom plan` and its
// JSON form (field names are a stable interface: fits, budget_bytes, params.*, peak.*,
// breakdown.*_bytes).
#pragma once

#include "planner/report/layer.h"

#include <string>

#include <nlohmann/json.hpp>

#include "models/attention_kernel_choice.h"
#include "planner/core/gpu_catalog.h"
#include "planner/core/training_config.h"
#include "planner/simulate/step_prediction.h"
#include "planner/solve/plan_search.h"
#include "planner/solve/step_time_model.h"

namespace headroom {

struct ReportInputs {
  std::string model_name;
  const TrainingConfig& config;
  const DeviceSpec& device;
  const StepPrediction& prediction;
  const StepTime& time;
  int64_t global_batch = 0;
  const SearchResult* search = nullptr;    // set when the solver chose the plan
  AttentionKernelChoice attention_kernel;  // the kernel the plan assumes, and why
  // The kernel of SDPA's sliding-window layers when they take a mask (a window shorter
  // than the sequence).
  std::optional<AttentionKernelChoice> window_attention_kernel;
  int64_t window_layers = 0;  // how many of the model's layers are sliding-window layers
  int64_t num_layers = 0;
  std::vector<std::string> assumptions;  // the graph's reference paths (OpGraph::assumptions)
  // The rule the verdict applies, the same for a typed plan and a solved one: the peak
  // against the device's memory less the margin (PlanOutcome).
  bool fits = false;
  int64_t usable_bytes = 0;
  double margin = 0;
};

std::string FormatPredictionText(const ReportInputs& in);
nlohmann::json PredictionJson(const ReportInputs& in);
// "4 nodes x 8 GPUs; the time assumes 450 GB/s per GPU within a node, 50 GB/s between
// nodes": the ranks in whole nodes and the links the step-time model prices.
std::string DescribeNodes(const Parallelism& parallel, const DeviceSpec& device);
// "full", "lora (rank 16 on q,v)", "qlora (rank 16 on q,v)"
std::string DescribeFineTune(const FineTuneConfig& ft);
// FSDP2's mixed precision as the plan runs it: the policy (given, or accelerate's) and
// whether torch.autocast is on.
std::string DescribeFsdpPrecision(const TrainingConfig& config);

}  // namespace headroom
