#include "runtime/hf_weights.h"

#include <set>
#include <stdexcept>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "planner/core/file_io.h"
#include "planner/core/text_escape.h"
#include "runtime/errors.h"

namespace headroom {
namespace {

bool IsAdapter(const std::string& name) { return name.find(".lora_") != std::string::npos; }

// GPT-2's Conv1D stores [in, out]; the graph (like nn.Linear) uses [out, in].
bool StoredTransposed(const ModelSpec& spec, const std::string& name) {
  if (spec.family != ModelFamily::kGpt2 || IsAdapter(name)) return false;
  for (const char* conv :
       {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.ends_with(conv)) return true;
  return false;
}

// Names a checkpoint may store a parameter under, most likely first.
std::vector<std::string> StoredNames(const std::string& name) {
  std::vector<std::string> out = {name};
  for (const char* prefix : {"transformer.", "model.", "bert."})
    if (name.rfind(prefix, 0) == 0) out.push_back(name.substr(std::string(prefix).size()));
  if (name.find("LayerNorm.") != std::string::npos) {
    for (size_t i = 0, n = out.size(); i < n; ++i) {
      if (out[i].ends_with(".weight"))
        out.push_back(out[i].substr(0, out[i].size() - 7) + ".gamma");
      if (out[i].ends_with(".bias")) out.push_back(out[i].substr(0, out[i].size() - 5) + ".beta");
    }
  }
  return out;
}

std::string ShapeText(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The module a parameter belongs to, without the final ".weight"/".bias".
std::string ModuleOf(const std::string& name) { return name.substr(0, name.rfind('.')); }

std::string LeafOf(const std::string& module) { return module.substr(module.rfind('.') + 1); }

}  // namespace

LoadSummary LoadPretrained(const ModelSpec& spec, const NamedTensors& params,
                           const SafetensorsCheckpoint& checkpoint) {
  torch::NoGradGuard no_grad;
  LoadSummary summary;
  std::set<std::string> used;
  for (const auto& [name, param] : params) {
    if (IsAdapter(name)) continue;  // adapters start from PEFT's initialization
    std::string stored;
    for (const std::string& candidate : StoredNames(name))
      if (checkpoint.contains(candidate)) {
        stored = candidate;
        break;
      }
    if (stored.empty()) {
      summary.missing.push_back(name);
      continue;
    }
    at::Tensor value = checkpoint.Read(stored);
    if (StoredTransposed(spec, name) && value.dim() == 2) value = value.t();
    if (value.sizes() != param.sizes())
      throw std::runtime_error(checkpoint.description() + ": tensor '" + stored + "' has shape " +
                               ShapeText(value.sizes()) + " but the model's " + name + " is " +
                               ShapeText(param.sizes()) + " (a checkpoint of another model?)");
    param.copy_(value);
    used.insert(stored);
    ++summary.loaded;
  }
  if (summary.loaded == 0)
    throw std::runtime_error(checkpoint.description() + " holds none of " + spec.name +
                             "'s parameters (first expected: " + params.front().first + ")");
  summary.unused = static_cast<int>(checkpoint.size() - used.size());
  return summary;
}

NamedTensors ToHfStateDict(const ModelSpec& spec, const NamedTensors& params) {
  NamedTensors out;
  for (const auto& [name, param] : params) {
    if (IsAdapter(name)) continue;
    at::Tensor t = param.detach();
    out.emplace_back(name, StoredTransposed(spec, name) ? t.t().contiguous() : t);
  }
  return out;
}

void SaveFullWeights(const std::filesystem::path& dir, const ModelSpec& spec,
                     const NamedTensors& params) {
  WriteSafetensors(dir / "model.safetensors", ToHfStateDict(spec, params), {{"format", "pt"}});
}

void SavePeftAdapter(const std::filesystem::path& dir, const ModelSpec& spec,
                     const FineTuneConfig& lora, const NamedTensors& params) {
  NamedTensors tensors;
  std::set<std::string> targets, modules_to_save;
  for (const auto& [name, param] : params) {
    if (IsAdapter(name)) {
      // "<module>.lora_A.weight": PEFT's target is the module's last name component.
      targets.insert(LeafOf(name.substr(0, name.find(".lora_"))));
      tensors.emplace_back("base_model.model." + name, param.detach());
    } else if (param.requires_grad()) {
      // A head trained in full next to the adapters (BERT's classifier): PEFT keeps it
      // as modules_to_save, stored under its own name (as PEFT 0.21 saves it).
      modules_to_save.insert(LeafOf(ModuleOf(name)));
      tensors.emplace_back("base_model.model." + name, param.detach());
    }
  }
  if (tensors.empty()) throw std::invalid_argument("no LoRA adapters to save (not a LoRA run)");
  WriteSafetensors(dir / "adapter_model.safetensors", tensors, {{"format", "pt"}});
  nlohmann::ordered_json config = {
      {"peft_type", "LORA"},
      {"task_type", spec.family == ModelFamily::kBert ? "SEQ_CLS" : "CAUSAL_LM"},
      {"base_model_name_or_path", spec.name},
      {"r", lora.lora_rank},
      {"lora_alpha", lora.lora_alpha},
      {"lora_dropout", lora.lora_dropout},
      {"target_modules", std::vector<std::string>(targets.begin(), targets.end())},
      {"bias", "none"},
      {"fan_in_fan_out", spec.family == ModelFamily::kGpt2},
      {"inference_mode", true},
  };
  if (!modules_to_save.empty())
    config["modules_to_save"] =
        std::vector<std::string>(modules_to_save.begin(), modules_to_save.end());
  const std::string text = JsonText(config) + "\n";
  ThrowIfError(WriteFileAtomically(dir / "adapter_config.json", text));
}

}  // namespace headroom
