#include "planner/plan/plan_advice.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "planner/core/byte_units.h"
#include "planner/solve/gpu_count_search.h"

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

// The smallest GPU of the catalog that is bigger than the request's and fits. Bigger
// means a size class up: more than 10% more memory (an A100-80GB is no bigger than an
// H100's 80 GB, 0.4% apart).
std::optional<Suggestion> BiggerGpu(const PlanRequest& request, const SearchOptions& options) {
  if (!request.device.is_cuda) return std::nullopt;
  std::vector<DeviceSpec> gpus = GpuCatalog();
  std::sort(gpus.begin(), gpus.end(), [](const DeviceSpec& a, const DeviceSpec& b) {
    return a.memory_bytes < b.memory_bytes;
  });
  for (const DeviceSpec& gpu : gpus) {
    if (static_cast<double>(gpu.memory_bytes) <=
        1.1 * static_cast<double>(request.device.memory_bytes))
      continue;
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

// One GPU's request spread over the fewest GPUs that fit (up to 64), with the fastest
// scheme there: the same training on more of the same hardware.
std::optional<Suggestion> MoreGpus(const PlanRequest& request, const OpGraph& graph,
                                   const SearchOptions& options) {
  if (!request.device.is_cuda || request.config.parallel.gpus > 1 || options.gpu_count)
    return std::nullopt;
  SearchOptions many = options;
  many.gpu_count = GpuCountOptions{.max_gpus = 64};
  TrainingConfig config = request.config;
  SearchResult r = SearchGpuCount(graph, config, request.device, many, *many.gpu_count);
  // A PyTorch loop under autocast caches every gathered weight's bf16 cast; FSDP2's bf16
  // policy (what accelerate runs) casts the shards instead.
  std::string policy;
  if (!r.feasible && config.precision == Precision::kAmpBf16 && !FsdpPolicyOf(config)) {
    config.parallel.fsdp_param_dtype = DType::kBF16;
    r = SearchGpuCount(graph, config, request.device, many, *many.gpu_count);
    policy = " --fsdp-param-dtype bf16";
  }
  if (!r.feasible) return std::nullopt;
  const Parallelism& p = r.plan.config.parallel;
  if (!p.fsdp()) policy.clear();
  return Suggestion{
      fmt::format("{} GPUs ({} node{} x {}) with sharding {} (--gpus {} --sharding {}{})", p.gpus,
                  p.nodes, p.nodes > 1 ? "s" : "", p.gpus_per_node(), ShardingName(p.sharding),
                  p.gpus, ShardingName(p.sharding), policy),
      PeakAgainstBudget(r.prediction, request.device), true};
}

// The order a practitioner accepts changes in: first the code that runs the same maths,
// then the same training on more GPUs, then the numerics (precision, optimizer), then
// what is trained (adapters), then the data (a shorter sequence), then new hardware.
enum class Acceptance { kImplementation, kMoreGpus, kNumerics, kAdapters, kData, kHardware };

using Consider = std::function<void(Acceptance, std::string, const PlanRequest&)>;

// A full fine-tune's alternatives: adapters, and the numerics alone and together.
void ConsiderFullFineTuneChanges(const PlanRequest& request, const Consider& consider) {
  const bool bf16 = request.device.supports_bf16();
  PlanRequest r = request;
  r.config.fine_tune = {.mode = FineTuneMode::kLora, .lora_rank = 16, .lora_targets = {}};
  consider(Acceptance::kAdapters, "LoRA rank 16 on the default targets instead of full fine-tuning",
           r);
  if (request.config.optimizer == OptimizerKind::kAdamW) {
    r = request;
    r.config.optimizer = OptimizerKind::kAdamW8bit;
    consider(Acceptance::kNumerics, "8-bit AdamW instead of AdamW", r);
  }
  if (bf16 && request.config.precision != Precision::kBf16) {
    r = request;
    r.config.precision = Precision::kBf16;
    consider(Acceptance::kNumerics,
             "bf16 weights, gradients and optimizer states (--precision bf16)", r);
    if (request.config.optimizer == OptimizerKind::kAdamW) {
      r.config.optimizer = OptimizerKind::kAdamW8bit;
      consider(Acceptance::kNumerics,
               "bf16 with 8-bit AdamW (--precision bf16 --optimizer adamw-8bit)", r);
    }
  }
}

// The same maths by other code: the optimizer's implementation, TRL's chunked loss.
void ConsiderImplementationChanges(const PlanRequest& request, const Consider& consider) {
  // The training code decides where torch.optim's foreach step copies every gradient
  // (a plain loop on CUDA) and HF Trainer's fused AdamW does not (training_config.cc).
  if (request.config.optimizer == OptimizerKind::kAdamW && !request.config.optimizer_impl &&
      EffectiveOptimizerImpl(request.config) == OptimizerImpl::kForeach) {
    PlanRequest r = request;
    r.config.stack = Stack::kHfTrainer;
    consider(Acceptance::kImplementation,
             "HF Trainer, fused AdamW: no foreach copy (--stack hf-trainer)", r);
    r = request;
    r.config.optimizer_impl = OptimizerImpl::kFused;
    consider(Acceptance::kImplementation, "AdamW(fused=True) in this loop (--optimizer-impl fused)",
             r);
  }
  // TRL's fused LM head computes the same loss in tiles (refused where it is not modelled).
  if (!request.config.loss.chunked()) {
    PlanRequest r = request;
    r.config.loss.kind = LossConfig::Kind::kChunked;
    consider(Acceptance::kImplementation,
             "TRL's chunked loss, the logits never whole (--loss chunked: add_fused_lm_head, "
             "as SFTTrainer adds it)",
             r);
  }
}

}  // namespace

std::vector<Suggestion> SuggestFixes(const PlanRequest& request, const OpGraph& graph,
                                     const SearchOptions& options) {
  std::vector<std::pair<Acceptance, Suggestion>> out;
  const std::optional<int64_t> today = SmallestPeak(request, options);
  const Consider consider = [&](Acceptance order, std::string change, const PlanRequest& r) {
    if (ValidateRequest(r)) return;
    if (auto peak = SmallestPeak(r, options))
      out.push_back(
          {order, {std::move(change), *peak, *peak <= UsableBytes(r.device, options.margin)}});
  };
  const FineTuneConfig& ft = request.config.fine_tune;
  if (ft.mode == FineTuneMode::kFull) ConsiderFullFineTuneChanges(request, consider);
  if (ft.mode != FineTuneMode::kQLora) {
    PlanRequest r = request;
    r.config.fine_tune.mode = FineTuneMode::kQLora;
    if (ft.mode == FineTuneMode::kFull)
      r.config.fine_tune = {.mode = FineTuneMode::kQLora, .lora_rank = 16};
    if (r.config.precision == Precision::kFp32) r.config.precision = Precision::kBf16;
    consider(Acceptance::kAdapters, "QLoRA (4-bit NF4 base) with rank-16 adapters", r);
  }
  ConsiderImplementationChanges(request, consider);
  if (request.config.seq_len >= 256) {
    PlanRequest r = request;
    r.config.seq_len = request.config.seq_len / 2;
    consider(
        Acceptance::kData,
        fmt::format("sequence length {} instead of {}", r.config.seq_len, request.config.seq_len),
        r);
  }
  if (auto more = MoreGpus(request, graph, options)) out.push_back({Acceptance::kMoreGpus, *more});
  if (auto gpu = BiggerGpu(request, options)) out.push_back({Acceptance::kHardware, *gpu});
  // A change is advice only when it needs less than today's smallest plan.
  if (today) std::erase_if(out, [&](const auto& o) { return o.second.peak_bytes >= *today; });
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.second.fits != b.second.fits) return a.second.fits;
    if (a.second.fits && a.first != b.first) return a.first < b.first;
    return a.second.peak_bytes < b.second.peak_bytes;
  });
  std::vector<Suggestion> ranked;
  for (auto& o : out) ranked.push_back(std::move(o.second));
  return ranked;
}

}  // namespace headroom
