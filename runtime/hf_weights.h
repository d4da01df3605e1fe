// Hugging Face weights in and out. The graph's parameter names are the HF model's
// (GPT2LMHeadModel, LlamaForCausalLM, BertForSequenceClassification); this file holds
// what differs in storage: GPT-2's Conv1D layers keep weights as [in, out], base-model
// checkpoints drop the head class's prefix ("h.0..." for "transformer.h.0..."), and
// older BERT checkpoints name LayerNorm parameters gamma/beta. LoRA adapters are saved
// the way PEFT saves them, so `PeftModel.from_pretrained` loads the result.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>

#include "models/model_spec.h"
#include "planner/core/training_config.h"
#include "runtime/safetensors.h"

namespace headroom {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct LoadSummary {
  int loaded = 0;
  std::vector<std::string> missing;  // parameters the checkpoint lacks (left as initialized)
  int unused = 0;                    // checkpoint tensors no parameter took
};

// Copies every base parameter found in the checkpoint into `params` (converting dtype).
// Throws std::runtime_error naming the tensor when a shape disagrees, and when the
// checkpoint provides none of the model's parameters (wrong model).
LoadSummary LoadPretrained(const ModelSpec& spec, const NamedTensors& params,
                           const SafetensorsCheckpoint& checkpoint);

// The base parameters in Hugging Face's stored layout (LoRA adapters left out).
NamedTensors ToHfStateDict(const ModelSpec& spec, const NamedTensors& params);

// `dir`/model.safetensors with the full weights.
void SaveFullWeights(const std::filesystem::path& dir, const ModelSpec& spec,
                     const NamedTensors& params);

// `dir`/adapter_model.safetensors and `dir`/adapter_config.json, as PEFT writes them.
void SavePeftAdapter(const std::filesystem::path& dir, const ModelSpec& spec,
                     const FineTuneConfig& lora, const NamedTensors& params);

}  // namespace headroom
