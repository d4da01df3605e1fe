// Trains a model with a plan on the local device: gradient accumulation (loss / steps,
// one optimizer step per effective batch), the planned checkpointed blocks, the
// precision regime (fp32, AMP bf16/fp16 with dynamic loss scaling, pure bf16, 16-bit
// with fp32 master weights), AdamW or
// SGD, full fine-tuning or LoRA; measures the peak memory against the planner's
// prediction. An out-of-memory inside a step is caught: the trainer re-plans for the
// memory it actually had and redoes the same effective batch (same samples, no update
// lost or applied twice). A training state file resumes a run bit for bit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include "models/model_spec.h"
#include "planner/core/plan.h"
#include "planner/core/gpu_catalog.h"
#include "planner/graph/op_graph.h"
#include "planner/core/result.h"
#include "planner/core/training_config.h"
#include "runtime/hf_weights.h"
#include "runtime/op_kernels.h"
#include "runtime/token_source.h"

namespace headroom {

struct TrainOptions {
  uint64_t seed = 0;
  double learning_rate = 1e-3;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  int64_t budget_bytes = 0;  // > 0: allocations past it fail like a CUDA OOM
  // Training tokens; null: the synthetic task. Must outlive the trainer.
  const TokenSource* data = nullptr;
  int max_oom_retries = 3;  // re-plans per step before the OOM is passed on
  // The device as the planner models it (context, workspace); unset: the CPU, or a
  // GPU of the memory the meter reports.
  std::optional<DeviceSpec> device_spec;
};

struct StepStats {
  int64_t step = 0;  // optimizer steps taken so far (skipped ones included)
  double loss = 0;   // mean over the step's micro-batches
  double seconds = 0;
  bool skipped = false;              // fp16 overflow: no update
  int oom_retries = 0;               // re-plans this step needed
  int64_t peak_allocated_bytes = 0;  // of this step
};

// Why `train` cannot execute a config (a planner-only optimizer, QLoRA, ...), if so.
std::optional<Error> CheckExecutable(const TrainingConfig& config);

class Trainer {
 public:
  // Runs `plan`, whose checkpoint set has one flag per block of the model's graph.
  Trainer(const ModelSpec& spec, const Plan& plan, const TrainOptions& options);
  // The plan of `config` with exactly these blocks checkpointed.
  Trainer(const ModelSpec& spec, const TrainingConfig& config, std::vector<bool> checkpointed,
          const TrainOptions& options);
  ~Trainer();

  // One optimizer step over grad_accum_steps micro-batches; on OOM, re-plans and redoes it.
  StepStats Step();
  // Forward and backward of micro-batch `index` of the current step (loss scaled by
  // 1 / accumulation steps), without the optimizer; returns the unscaled loss.
  double ForwardBackward(int64_t index = 0);

  // Pretrained weights from a Hugging Face safetensors checkpoint (before training).
  LoadSummary LoadWeights(const SafetensorsCheckpoint& checkpoint);
  // Full weights as model.safetensors, or for LoRA the PEFT adapter, into `dir`.
  void SaveWeights(const std::filesystem::path& dir) const;
  // Everything needed to continue bit for bit: trainable weights, optimizer state,
  // step, RNG, loss scale; written atomically.
  void SaveState(const std::filesystem::path& file) const;
  // Throws std::runtime_error when the file is not a state of this model and config.
  void LoadState(const std::filesystem::path& file);

  const OpGraph& graph() const;
  const Plan& plan() const;  // the current plan (changes after a re-plan)
  const TrainingConfig& config() const { return plan().config; }
  const std::vector<bool>& checkpointed() const { return plan().checkpointed; }
  int64_t steps_done() const;
  // Parameters by Hugging Face name.
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() const;
  int64_t predicted_peak_allocated_bytes() const { return predicted_allocated_; }
  int64_t predicted_peak_reserved_bytes() const { return predicted_reserved_; }
  int64_t measured_peak_allocated_bytes() const;
  int64_t measured_peak_reserved_bytes() const;
  // The routing the mixture-of-experts layers saw over the run (no calls: a dense model).
  const ExpertLoad& expert_load() const;
  void set_budget_bytes(int64_t bytes);
  // Called after each re-plan with a sentence saying what changed.
  void set_replan_listener(std::function<void(const std::string&)> listener);

 private:
  struct State;
  void Predict();
  void Replan(int64_t available_bytes);
  std::unique_ptr<State> s_;
  int64_t predicted_allocated_ = 0;
  int64_t predicted_reserved_ = 0;
  // Maxima over the steps since the run (or the last re-plan) started: saving and
  // loading between steps is not part of a training step's memory.
  int64_t measured_allocated_ = 0;
  int64_t measured_reserved_ = 0;
};

}  // namespace headroom
