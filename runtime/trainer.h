// Trains a model with a plan on the local device: gradient accumulation (loss / steps,
// one optimizer step per effective batch), the planned checkpointed blocks, the
// precision regime (fp32, AMP bf16/fp16 with dynamic loss scaling, pure bf16), AdamW or
// SGD, full fine-tuning or LoRA; measures the peak of live tensor bytes against the
// planner's prediction.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "models/model_spec.h"
#include "planner/op_graph.h"
#include "planner/result.h"
#include "planner/training_config.h"

namespace headroom {

struct TrainOptions {
  uint64_t seed = 0;
  double learning_rate = 1e-3;
  int64_t cpu_budget_bytes = 0;  // > 0: allocations past it fail like a CUDA OOM
};

struct StepStats {
  int64_t step = 0;  // optimizer steps taken so far (skipped ones included)
  double loss = 0;   // mean over the step's micro-batches
  double seconds = 0;
  bool skipped = false;            // fp16 overflow: no update
  int64_t peak_allocated_bytes = 0;  // since the run started
};

struct RunReport {
  int64_t predicted_peak_allocated_bytes = 0;
  int64_t measured_peak_allocated_bytes = 0;
  double error_pct = 0;  // (measured - predicted) / predicted
  int64_t steps = 0;
  double loss_first = 0, loss_last = 0;
  double tokens_per_second = 0;
  int64_t skipped_steps = 0;
  int64_t oom_retries = 0;
};

// Why `train` cannot execute a config (a planner-only optimizer, QLoRA, ...), if so.
std::optional<Error> CheckExecutable(const TrainingConfig& config);

class Trainer {
 public:
  // `checkpointed` has one flag per block of the model's graph.
  Trainer(const ModelSpec& spec, const TrainingConfig& config, std::vector<bool> checkpointed,
          const TrainOptions& options);
  ~Trainer();

  // One optimizer step over grad_accum_steps micro-batches.
  StepStats Step();
  // Forward and backward of one micro-batch (loss scaled by 1 / accumulation steps),
  // without the optimizer; returns the unscaled loss.
  double ForwardBackward();

  const OpGraph& graph() const;
  // Parameters by Hugging Face name.
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() const;
  int64_t predicted_peak_allocated_bytes() const { return predicted_peak_; }
  int64_t measured_peak_allocated_bytes() const;
  void set_cpu_budget_bytes(int64_t bytes);

 private:
  struct State;
  std::unique_ptr<State> s_;
  int64_t predicted_peak_ = 0;
};

}  // namespace headroom
