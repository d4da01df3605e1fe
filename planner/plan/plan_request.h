// A planning request — model spec, training config, device — validated as a whole
// (sizes, sequence length against the model, bf16 against the GPU, LoRA targets), and
// the one call that turns it into a prediction.
#pragma once

#include "planner/plan/layer.h"

#include "models/build_graph.h"
#include "models/model_spec.h"
#include "planner/core/gpu_catalog.h"
#include "planner/core/result.h"
#include "planner/simulate/step_prediction.h"
#include "planner/core/training_config.h"

namespace headroom {

struct PlanRequest {
  ModelSpec model;
  TrainingConfig config;
  DeviceSpec device;
};

// The attention a device actually runs. On the CPU, PyTorch's SDPA with attention
// dropout falls back to its math kernel, which keeps the attention probabilities (and
// the dropout mask) for backward exactly as eager attention does; so it is planned as
// eager there. CUDA's flash and memory-efficient kernels support dropout.
AttentionImpl AttentionAsExecuted(const ModelSpec& model, AttentionImpl requested,
                                  const DeviceSpec& device);

// The user-facing checks of a request; the message says what is wrong.
std::optional<Error> ValidateRequest(const PlanRequest& request);

// Validates, builds the graph and predicts one training step.
Result<StepPrediction> Predict(const PlanRequest& request);

}  // namespace headroom
