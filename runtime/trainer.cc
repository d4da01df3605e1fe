#include "runtime/trainer.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <torch/torch.h>

#include "models/build_graph.h"
#include "planner/core/byte_units.h"
#include "planner/core/file_io.h"
#include "planner/simulate/step_prediction.h"
#include "planner/simulate/tensor_states.h"
#include "planner/solve/plan_search.h"
#include "runtime/batch_builder.h"
#include "runtime/errors.h"
#include "runtime/formats/training_state_header.h"
#include "runtime/graph_executor.h"
#include "runtime/loss_scaler.h"
#include "runtime/master_weights.h"
#include "runtime/memory_meter.h"
#include "runtime/optimizer_state.h"
#include "runtime/parameter_store.h"
#include "runtime/rng_state.h"
#include "runtime/safetensors.h"

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
  if (config.attention == AttentionImpl::kFlash2) {
    return MakeError(
        "--attention flash2 (the flash-attn package) is modelled by the planner but not executed "
        "by `train`; use sdpa");
  }
  if (config.parallel.distributed()) {
    // (No fmt here: LibTorch's headers bring their own.)
    return MakeError("--sharding " + std::string(ShardingName(config.parallel.sharding)) +
                     " over " + std::to_string(config.parallel.gpus) +
                     " ranks is planned by headroom but run by the engines it exports to: "
                     "`headroom plan ... --emit deepspeed | accelerate-fsdp | torchrun | hf`; "
                     "`train` runs one process");
  }
  return std::nullopt;
}

namespace {

// What a state file must agree on with the run resuming it.
std::string Fingerprint(const ModelSpec& spec, const TrainingConfig& config, uint64_t seed) {
  return spec.name + "|seed" + std::to_string(seed) + "|" +
         std::string(PrecisionName(config.precision)) + "|" +
         std::string(OptimizerName(config.optimizer)) + "|" +
         std::string(FineTuneName(config.fine_tune.mode)) + "|r" +
         std::to_string(config.fine_tune.lora_rank) + "|s" + std::to_string(config.seq_len) + "|g" +
         std::to_string(config.micro_batch * config.grad_accum_steps);
}

}  // namespace

struct Trainer::State {
  ModelSpec spec;
  Plan plan;
  TrainOptions options;
  std::unique_ptr<MemoryMeter> meter;  // installed before any tensor of the run is allocated
  OpGraph graph;
  std::unique_ptr<ParameterStore> params;
  std::unique_ptr<GraphExecutor> executor;
  std::unique_ptr<TokenSource> synthetic;
  std::unique_ptr<BatchBuilder> batches;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::optional<MasterWeights> masters;  // the mixed-* regimes: what the optimizer updates
  std::optional<DynamicLossScaler> scaler;
  std::function<void(const std::string&)> replan_listener;
  ExpertLoad expert_load;  // what the mixture-of-experts layers routed, over the run
  int64_t steps = 0;

  int64_t global_batch() const { return plan.global_batch; }
  void ZeroGrads() {
    for (at::Tensor& p : params->Trainable()) p.mutable_grad().reset();
  }
  DeviceSpec PlannedDevice(int64_t memory) const {
    DeviceSpec d = options.device_spec ? *options.device_spec
                                       : DeviceWithMemory(options.device.is_cuda(), memory);
    d.memory_bytes = memory;
    return d;
  }
};

Trainer::Trainer(const ModelSpec& spec, const TrainingConfig& config,
                 std::vector<bool> checkpointed, const TrainOptions& options)
    : Trainer(spec,
              Plan::WithCheckpointed(config, std::move(checkpointed),
                                     config.micro_batch * config.grad_accum_steps),
              options) {}

Trainer::Trainer(const ModelSpec& spec, const Plan& plan, const TrainOptions& options)
    : s_(std::make_unique<State>()) {
  const TrainingConfig& config = plan.config;
  if (auto error = CheckExecutable(config)) throw std::invalid_argument(error->message);
  s_->spec = spec;
  s_->plan = plan;
  // What this runtime executes: LibTorch's per-parameter optimizers, its own dropout,
  // and the device's kernels.
  s_->plan.config.stack = Stack::kHeadroom;
  // The GPU's compute capability comes from the plan (the catalog entry it targets).
  s_->plan.config.kernels = {.cuda = options.device.is_cuda(),
                             .cpu_bf16 = HostCpuBf16(),
                             .cpu_threads = at::get_num_threads(),
                             .compute_capability = config.kernels.compute_capability};
  s_->options = options;
  s_->meter = MakeMemoryMeter(options.device);
  Result<OpGraph> graph = BuildGraph(spec, GraphOptionsOf(s_->plan.config));
  if (!graph) throw std::invalid_argument(graph.error().message);
  s_->graph = std::move(*graph);
  if (s_->plan.checkpointed.size() != s_->graph.blocks().size())
    throw std::invalid_argument("checkpoint flags do not match the model's blocks");
  const TensorStates states(s_->graph, RegimeOf(config.precision), CostTargetOf(s_->plan.config));
  s_->params = std::make_unique<ParameterStore>(s_->graph, states, options.seed, options.device);
  s_->executor =
      std::make_unique<GraphExecutor>(s_->graph, s_->plan.config, *s_->params, &s_->expert_load);
  const TokenSource* data = options.data;
  if (!data) {
    s_->synthetic = MakeSyntheticTokens(spec.vocab_size, options.seed + 1);
    data = s_->synthetic.get();
  }
  s_->batches = std::make_unique<BatchBuilder>(s_->graph, s_->spec, config.seq_len, *data);
  std::vector<at::Tensor> trainable = s_->params->Trainable();
  if (RegimeOf(config.precision).master_weights) {
    s_->masters.emplace(trainable);
    trainable = s_->masters->masters();
  }
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
  Predict();
  set_budget_bytes(options.budget_bytes);
  torch::manual_seed(options.seed + 2);  // dropout masks (every device's generator)
}

Trainer::~Trainer() = default;

void Trainer::Predict() {
  const StepPrediction p = PredictStep(s_->graph, s_->plan.config, s_->plan.checkpointed,
                                       s_->PlannedDevice(int64_t{1} << 40));
  predicted_allocated_ = p.allocated_peak_bytes;
  predicted_reserved_ = p.reserved_peak_bytes;
}

const OpGraph& Trainer::graph() const { return s_->graph; }
const Plan& Trainer::plan() const { return s_->plan; }
int64_t Trainer::steps_done() const { return s_->steps; }

std::vector<std::pair<std::string, at::Tensor>> Trainer::NamedParameters() const {
  return s_->params->Named();
}

int64_t Trainer::measured_peak_allocated_bytes() const { return measured_allocated_; }
int64_t Trainer::measured_peak_reserved_bytes() const { return measured_reserved_; }
const ExpertLoad& Trainer::expert_load() const { return s_->expert_load; }
void Trainer::set_budget_bytes(int64_t bytes) { s_->meter->set_budget_bytes(bytes); }
void Trainer::set_replan_listener(std::function<void(const std::string&)> listener) {
  s_->replan_listener = std::move(listener);
}

double Trainer::ForwardBackward(int64_t index) {
  const int64_t b = s_->plan.config.micro_batch;
  std::vector<at::Tensor> inputs =
      s_->batches->Inputs(s_->steps * s_->global_batch() + index * b, b);
  for (at::Tensor& t : inputs)
    if (t.defined()) t = t.to(s_->options.device);
  at::Tensor loss = s_->executor->Forward(std::move(inputs), s_->plan.checkpointed);
  const double value = loss.item<double>();
  double factor = 1.0 / static_cast<double>(s_->plan.config.grad_accum_steps);
  if (s_->scaler) factor *= s_->scaler->scale();
  (loss * factor).backward();
  return value;
}

void Trainer::Replan(int64_t available_bytes) {
  SearchOptions options;
  options.global_batch = s_->global_batch();
  SearchResult plan =
      SearchPlan(s_->graph, s_->plan.config, s_->PlannedDevice(available_bytes), options);
  if (!plan.feasible)
    throw std::runtime_error("out of memory, and no plan fits the " + FormatBytes(available_bytes) +
                             " available: the smallest needs " +
                             FormatBytes(plan.prediction.device_peak_bytes));
  const std::string what = "out of memory at micro-batch " +
                           std::to_string(s_->plan.config.micro_batch) + " x " +
                           std::to_string(s_->plan.config.grad_accum_steps) + "; re-planned for " +
                           FormatBytes(available_bytes) + ": micro-batch " +
                           std::to_string(plan.plan.config.micro_batch) + " x " +
                           std::to_string(plan.plan.config.grad_accum_steps) + ", " +
                           std::to_string(plan.plan.num_checkpointed()) + " of " +
                           std::to_string(plan.plan.num_blocks()) +
                           " blocks checkpointed; redoing step " + std::to_string(s_->steps + 1);
  s_->plan = plan.plan;
  s_->executor =
      std::make_unique<GraphExecutor>(s_->graph, s_->plan.config, *s_->params, &s_->expert_load);
  Predict();
  if (s_->replan_listener) s_->replan_listener(what);
}

StepStats Trainer::Step() {
  const auto start = std::chrono::steady_clock::now();
  StepStats stats;
  double total = 0;
  s_->meter->ResetPeak();
  for (;;) {
    try {
      total = 0;
      for (int64_t mb = 0; mb < s_->plan.config.grad_accum_steps; ++mb)
        total += ForwardBackward(mb);
      break;
    } catch (const c10::OutOfMemoryError&) {
      // The step's partial gradients are dropped and its samples redone from the first;
      // no update has been applied yet. (Dropout draws fresh masks for the redo.)
      s_->ZeroGrads();
      if (stats.oom_retries == s_->options.max_oom_retries) throw;
      ++stats.oom_retries;
      Replan(s_->meter->available_bytes());
      s_->meter->ResetPeak();
      measured_allocated_ = measured_reserved_ = 0;
    }
  }
  bool take = true;
  if (s_->masters) {
    // 16-bit gradients are unscaled in their fp32 copies, one parameter at a time.
    const double unscale = s_->scaler ? 1.0 / s_->scaler->scale() : 1.0;
    if (s_->scaler) take = s_->scaler->CheckAndUpdate(s_->params->Trainable());
    if (take) s_->masters->Step(*s_->optimizer, unscale);
  } else {
    if (s_->scaler) take = s_->scaler->UnscaleAndUpdate(s_->params->Trainable());
    if (take) s_->optimizer->step();
  }
  s_->ZeroGrads();
  stats.step = ++s_->steps;
  stats.loss = total / static_cast<double>(s_->plan.config.grad_accum_steps);
  stats.skipped = !take;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats.peak_allocated_bytes = s_->meter->allocated().peak;
  measured_allocated_ = std::max(measured_allocated_, stats.peak_allocated_bytes);
  measured_reserved_ = std::max(measured_reserved_, s_->meter->reserved().peak);
  return stats;
}

LoadSummary Trainer::LoadWeights(const SafetensorsCheckpoint& checkpoint) {
  LoadSummary summary = LoadPretrained(s_->spec, s_->params->Named(), checkpoint);
  if (s_->masters) s_->masters->SyncFromModel();
  return summary;
}

void Trainer::SaveWeights(const std::filesystem::path& dir) const {
  if (s_->plan.config.fine_tune.mode == FineTuneMode::kFull)
    SaveFullWeights(dir, s_->spec, s_->params->Named());
  else
    SavePeftAdapter(dir, s_->spec, s_->plan.config.fine_tune, s_->params->Named());
}

void Trainer::SaveState(const std::filesystem::path& file) const {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [name, tensor] : s_->params->Named())
    if (tensor.requires_grad()) tensors.emplace_back("param/" + name, tensor.detach());
  if (s_->masters) {
    const std::vector<at::Tensor>& masters = s_->masters->masters();
    for (size_t i = 0; i < masters.size(); ++i)
      tensors.emplace_back("master/" + std::to_string(i), masters[i]);
  }
  for (auto& named : ExportOptimizerState(*s_->optimizer)) tensors.push_back(std::move(named));
  tensors.emplace_back("rng/cpu", GetRngState(c10::Device(c10::DeviceType::CPU)));
  if (s_->options.device.is_cuda())
    tensors.emplace_back("rng/device", GetRngState(s_->options.device));
  if (s_->scaler)
    tensors.emplace_back("loss_scaler", torch::tensor(s_->scaler->State(), torch::kDouble));
  const TrainingStateInfo info{Fingerprint(s_->spec, s_->plan.config, s_->options.seed), s_->steps};
  WriteSafetensors(file, tensors, TrainingStateMetadata(info));
}

namespace {

// The saved tensor `name`, of `like`'s shape and dtype, on `like`'s device.
at::Tensor ReadLike(const SafetensorsFile& state, const std::string& name, const at::Tensor& like) {
  if (!state.contains(name))
    throw std::runtime_error(state.path().string() + ": no tensor " + name);
  at::Tensor saved = state.Read(name);
  if (saved.sizes() != like.sizes() || saved.scalar_type() != like.scalar_type())
    throw std::runtime_error(state.path().string() + ": " + name + " is " +
                             c10::str(saved.scalar_type(), saved.sizes()) + ", this run's " +
                             c10::str(like.scalar_type(), like.sizes()));
  return saved;
}

}  // namespace

void Trainer::LoadState(const std::filesystem::path& file) {
  const std::string where = file.string();
  const SafetensorsFile state(file);  // the header is checked against the file here
  const TrainingStateInfo info = ValueOrThrow(ReadTrainingStateInfo(state.metadata(), where));
  const std::string expected = Fingerprint(s_->spec, s_->plan.config, s_->options.seed);
  if (info.fingerprint != expected)
    throw std::runtime_error(where + ": saved by a run of " + info.fingerprint +
                             ", not this one (" + expected + ")");
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : s_->params->Named())
    if (tensor.requires_grad()) tensor.copy_(ReadLike(state, "param/" + name, tensor));
  if (s_->masters) {
    const std::vector<at::Tensor>& masters = s_->masters->masters();
    for (size_t i = 0; i < masters.size(); ++i)
      masters[i].copy_(ReadLike(state, "master/" + std::to_string(i), masters[i]));
  }
  ImportOptimizerState(
      *s_->optimizer,
      [&](const std::string& name, const at::Tensor& like) -> std::optional<at::Tensor> {
        if (!state.contains(name)) return std::nullopt;
        return ReadLike(state, name, like);
      },
      where);
  const at::Tensor cpu_rng = GetRngState(c10::Device(c10::DeviceType::CPU));
  SetRngState(c10::Device(c10::DeviceType::CPU), ReadLike(state, "rng/cpu", cpu_rng));
  if (s_->options.device.is_cuda() && state.contains("rng/device"))
    SetRngState(s_->options.device, ReadLike(state, "rng/device", GetRngState(s_->options.device)));
  if (s_->scaler) {
    const std::vector<double> now = s_->scaler->State();
    const at::Tensor saved = ReadLike(state, "loss_scaler", torch::tensor(now, torch::kDouble));
    s_->scaler->Restore(
        std::vector<double>(saved.data_ptr<double>(), saved.data_ptr<double>() + saved.numel()));
  }
  s_->steps = info.steps;
}

}  // namespace headroom
