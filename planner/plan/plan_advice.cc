#include "planner/plan/plan_advice.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/core/byte_units.h"

namespace headroom {
namespace {

// The least memory a request can train with: micro-batch 1, every block checkpointed
// (the search's own last resort).
std::optional<int64_t> SmallestPeak(PlanRequest r, const SearchOptions& options) {
  r.config.micro_batch = 1;
  r.config.grad_accum_steps = PerGpuBatch(options);
  r.config.checkpoint =
      options.fixed_checkpoint.value_or(CheckpointPolicy{.kind = CheckpointPolicy::Kind::kAll});
  auto p = Predict(r);
  if (!p) return std::nullopt;
  return PeakAgainstBudget(*p, r.device);
}

// The smallest GPU of the catalog, larger than the request's, that fits.
std::optional<Suggestion> BiggerGpu(const PlanRequest& request, const SearchOptions& options) {
  if (!request.device.is_cuda) return std::nullopt;
  std::vector<DeviceSpec> gpus = GpuCatalog();
  std::sort(gpus.begin(), gpus.end(), [](const DeviceSpec& a, const DeviceSpec& b) {
    return a.memory_bytes < b.memory_bytes;
  });
  for (const DeviceSpec& gpu : gpus) {
    if (gpu.memory_bytes <= request.device.memory_bytes) continue;
    PlanRequest r = request;
    r.device = gpu;
    if (ValidateRequest(r)) continue;
    auto peak = SmallestPeak(r, options);
    if (peak && *peak <= UsableBytes(gpu, options.margin))
      return Suggestion{
          fmt::format("a bigger GPU: {} ({})", gpu.name, FormatBytes(gpu.memory_bytes)), *peak,
          true};
  }
  return std::nullopt;
}

}  // namespace

std::vector<Suggestion> SuggestFixes(const PlanRequest& request, const SearchOptions& options) {
  std::vector<Suggestion> out;
  auto consider = [&](std::string change, const PlanRequest& r) {
    if (auto peak = SmallestPeak(r, options))
      out.push_back({std::move(change), *peak, *peak <= UsableBytes(r.device, options.margin)});
  };
  const FineTuneConfig& ft = request.config.fine_tune;
  if (ft.mode == FineTuneMode::kFull) {
    PlanRequest r = request;
    r.config.fine_tune = {.mode = FineTuneMode::kLora, .lora_rank = 16, .lora_targets = {}};
    consider("LoRA rank 16 on the default targets instead of full fine-tuning", r);
    if (request.config.optimizer == OptimizerKind::kAdamW) {
      r = request;
      r.config.optimizer = OptimizerKind::kAdamW8bit;
      consider("8-bit AdamW instead of AdamW", r);
    }
  }
  if (ft.mode != FineTuneMode::kQLora) {
    PlanRequest r = request;
    r.config.fine_tune.mode = FineTuneMode::kQLora;
    if (ft.mode == FineTuneMode::kFull)
      r.config.fine_tune = {.mode = FineTuneMode::kQLora, .lora_rank = 16};
    if (r.config.precision == Precision::kFp32) r.config.precision = Precision::kBf16;
    consider("QLoRA (4-bit NF4 base) with rank-16 adapters", r);
  }
  // The training code decides where torch.optim's foreach step copies every gradient
  // (a plain loop on CUDA) and HF Trainer's fused AdamW does not (training_config.cc).
  if (request.config.optimizer == OptimizerKind::kAdamW && !request.config.optimizer_impl &&
      EffectiveOptimizerImpl(request.config) == OptimizerImpl::kForeach) {
    PlanRequest r = request;
    r.config.stack = Stack::kHfTrainer;
    consider("HF Trainer, fused AdamW: no foreach copy (--stack hf-trainer)", r);
    r = request;
    r.config.optimizer_impl = OptimizerImpl::kFused;
    consider("AdamW(fused=True) in this loop (--optimizer-impl fused)", r);
  }
  if (request.config.seq_len >= 256) {
    PlanRequest r = request;
    r.config.seq_len = request.config.seq_len / 2;
    consider(
        fmt::format("sequence length {} instead of {}", r.config.seq_len, request.config.seq_len),
        r);
  }
  if (auto gpu = BiggerGpu(request, options)) out.push_back(*gpu);
  std::stable_sort(out.begin(), out.end(), [](const Suggestion& a, const Suggestion& b) {
    if (a.fits != b.fits) return a.fits;
    return a.peak_bytes < b.peak_bytes;
  });
  return out;
}

}  // namespace headroom
