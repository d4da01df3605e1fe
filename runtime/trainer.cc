#include "runtime/trainer.h"

#include <chrono>
#include <stdexcept>

#include <torch/torch.h>

#include "models/build_graph.h"
#include "planner/gpu_catalog.h"
#include "planner/step_prediction.h"
#include "planner/tensor_states.h"
#include "runtime/counting_cpu_allocator.h"
#include "runtime/graph_executor.h"
#include "runtime/loss_scaler.h"
#include "runtime/parameter_store.h"
#include "runtime/synthetic_batches.h"

namespace headroom {

std::optional<Error> CheckExecutable(const TrainingConfig& config) {
  switch (config.optimizer) {
    case OptimizerKind::kAdamW:
    case OptimizerKind::kSgd:
    case OptimizerKind::kSgdMomentum:
      break;
    default:
      return MakeError("the " + std::string(OptimizerName(config.optimizer)) +
                       " optimizer is modelled by the planner but not executed by `train`; use "
                       "adamw, sgd or sgd-momentum");
  }
  if (config.fine_tune.mode == FineTuneMode::kQLora) {
    return MakeError(
        "QLoRA (4-bit NF4 base weights) is modelled by the planner but not executed by `train`; "
        "use --lora-rank without --qlora");
  }
  if (config.precision == Precision::kMixedBf16 || config.precision == Precision::kMixedFp16) {
    return MakeError("precision " + std::string(PrecisionName(config.precision)) +
                     " (16-bit weights with fp32 master copies) is not executed by `train` yet; "
                     "use fp32, amp-bf16, amp-fp16 or bf16");
  }
  return std::nullopt;
}

struct Trainer::State {
  ModelSpec spec;
  TrainingConfig config;
  std::vector<bool> checkpointed;
  TrainOptions options;
  CpuMemoryMeter meter;  // installed before any tensor of the run is allocated
  OpGraph graph;
  std::unique_ptr<ParameterStore> params;
  std::unique_ptr<GraphExecutor> executor;
  std::unique_ptr<SyntheticBatches> batches;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::optional<DynamicLossScaler> scaler;
  int64_t steps = 0;
};

Trainer::Trainer(const ModelSpec& spec, const TrainingConfig& config,
                 std::vector<bool> checkpointed, const TrainOptions& options)
    : s_(std::make_unique<State>()) {
  if (auto error = CheckExecutable(config)) throw std::invalid_argument(error->message);
  s_->spec = spec;
  s_->config = config;
  s_->checkpointed = std::move(checkpointed);
  s_->options = options;
  Result<OpGraph> graph =
      BuildGraph(spec, {.attention = config.attention, .fine_tune = config.fine_tune});
  if (!graph) throw std::invalid_argument(graph.error().message);
  s_->graph = std::move(*graph);
  if (s_->checkpointed.size() != s_->graph.blocks().size())
    throw std::invalid_argument("checkpoint flags do not match the model's blocks");
  const TensorStates states(s_->graph, RegimeOf(config.precision));
  s_->params = std::make_unique<ParameterStore>(s_->graph, states, options.seed);
  s_->executor = std::make_unique<GraphExecutor>(s_->graph, s_->spec, s_->config, *s_->params);
  s_->batches =
      std::make_unique<SyntheticBatches>(s_->graph, s_->spec, s_->config, options.seed + 1);
  const std::vector<at::Tensor> trainable = s_->params->Trainable();
  switch (config.optimizer) {
    case OptimizerKind::kAdamW:
      s_->optimizer = std::make_unique<torch::optim::AdamW>(
          trainable, torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.0));
      break;
    case OptimizerKind::kSgdMomentum:
      s_->optimizer = std::make_unique<torch::optim::SGD>(
          trainable, torch::optim::SGDOptions(options.learning_rate).momentum(0.9));
      break;
    default:
      s_->optimizer = std::make_unique<torch::optim::SGD>(
          trainable, torch::optim::SGDOptions(options.learning_rate));
      break;
  }
  if (RegimeOf(config.precision).loss_scaling) s_->scaler.emplace();
  predicted_peak_ = PredictStep(s_->graph, config, s_->checkpointed, CpuDevice(int64_t{1} << 40))
                        .allocated_peak_bytes;
  set_cpu_budget_bytes(options.cpu_budget_bytes);
  torch::manual_seed(options.seed + 2);  // dropout masks
  s_->meter.allocator().ResetPeak();
}

Trainer::~Trainer() = default;

const OpGraph& Trainer::graph() const { return s_->graph; }

std::vector<std::pair<std::string, at::Tensor>> Trainer::NamedParameters() const {
  return s_->params->Named();
}

int64_t Trainer::measured_peak_allocated_bytes() const {
  return s_->meter.allocator().peak_bytes();
}

void Trainer::set_cpu_budget_bytes(int64_t bytes) { s_->meter.allocator().set_budget_bytes(bytes); }

double Trainer::ForwardBackward() {
  at::Tensor loss = s_->executor->Forward(s_->batches->Next(), s_->checkpointed);
  const double value = loss.item<double>();
  double factor = 1.0 / static_cast<double>(s_->config.grad_accum_steps);
  if (s_->scaler) factor *= s_->scaler->scale();
  (loss * factor).backward();
  return value;
}

StepStats Trainer::Step() {
  const auto start = std::chrono::steady_clock::now();
  StepStats stats;
  double total = 0;
  for (int64_t mb = 0; mb < s_->config.grad_accum_steps; ++mb) total += ForwardBackward();
  bool take = true;
  if (s_->scaler) take = s_->scaler->UnscaleAndUpdate(s_->params->Trainable());
  if (take) s_->optimizer->step();
  s_->optimizer->zero_grad(/*set_to_none=*/true);
  stats.step = ++s_->steps;
  stats.loss = total / static_cast<double>(s_->config.grad_accum_steps);
  stats.skipped = !take;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats.peak_allocated_bytes = measured_peak_allocated_bytes();
  return stats;
}

}  // namespace headroom
