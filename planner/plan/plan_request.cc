#include "planner/plan/plan_request.h"

#include <cmath>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/limits.h"
#include "planner/simulate/step_size_bound.h"

namespace headroom {

AttentionImpl AttentionAsExecuted(const ModelSpec& model, AttentionImpl requested,
                                  const DeviceSpec& device) {
  if (requested == AttentionImpl::kSdpa && !device.is_cuda && model.attention_dropout > 0)
    return AttentionImpl::kEager;
  // Gemma2PreTrainedModel has _supports_sdpa = False (modeling_gemma2.py:353): asked for
  // nothing, transformers falls back to eager (modeling_utils.py:1882-1889).
  if (model.family == ModelFamily::kGemma2 && requested == AttentionImpl::kSdpa)
    return AttentionImpl::kEager;
  return requested;
}

namespace {

// TRL's fused LM head replaces a built causal LM's loss in a Python training loop.
std::optional<Error> CheckLoss(const PlanRequest& r) {
  const LossConfig& loss = r.config.loss;
  if (!loss.chunked()) return std::nullopt;
  if (auto error = limits::CheckRange(loss.vocab_tile, 1, limits::kMaxVocabTile,
                                      "--loss chunked:N (the tile's vocabulary entries)"))
    return error;
  if (!RunsPythonStack(r.config.stack))
    return MakeError(
        "--loss chunked is TRL's fused LM head, a Python training loop's; headroom's runtime "
        "(--stack headroom) computes the full loss");
  if (r.model.family == ModelFamily::kBert)
    return MakeError(fmt::format(
        "--loss chunked replaces a causal LM's loss; {} is a sequence classifier", r.model.name));
  if (r.model.family == ModelFamily::kImported)
    return MakeError(fmt::format(
        "--loss chunked: {} is imported from its transformers code, whose traced forward ends in "
        "the model's own loss; TRL's fused LM head over an imported graph is not modelled",
        r.model.name));
  return std::nullopt;
}

// Padding-free rows: one row of packed samples, as transformers feeds them to the families
// headroom builds with their masks made from position_ids.
std::optional<Error> CheckPacking(const PlanRequest& r) {
  const TrainingConfig& c = r.config;
  if (c.packing != Packing::kPaddingFree) return std::nullopt;
  if (!RunsPythonStack(c.stack))
    return MakeError(
        "--packing padding-free is transformers' DataCollatorWithFlattening; headroom's runtime "
        "(--stack headroom) trains padded rows");
  switch (r.model.family) {
    case ModelFamily::kGpt2:
    case ModelFamily::kBert:
    case ModelFamily::kImported:
      return MakeError(fmt::format(
          "--packing padding-free is modelled for the Llama, Qwen, Mistral, Mixtral, Phi-3 and "
          "Gemma families headroom builds; {} is not one",
          r.model.name));
    default:
      break;
  }
  if (c.micro_batch != 1)
    return MakeError(fmt::format(
        "--packing padding-free packs a micro-batch into one row of --tokens-per-micro-batch "
        "tokens; --micro-batch {} is not 1",
        c.micro_batch));
  if (c.attention == AttentionImpl::kEager)
    return MakeError(
        "--packing padding-free with --attention eager is not modelled (the additive mask "
        "eager_mask makes from the packed boolean one); use sdpa or flash2");
  return std::nullopt;
}

// transformers' offload wraps its own checkpoint function: a built model on a GPU, trained
// in Python.
std::optional<Error> CheckActivationOffload(const PlanRequest& r) {
  if (!r.config.activation_offload) return std::nullopt;
  if (!RunsPythonStack(r.config.stack))
    return MakeError(
        "--activation-offload is transformers' activation_checkpointing_enable(offload=True); "
        "headroom's runtime (--stack headroom) keeps activations on the device");
  if (!r.device.is_cuda)
    return MakeError(
        "--activation-offload moves activations from a GPU to host memory; on --device cpu they "
        "are in host memory already");
  if (r.model.family == ModelFamily::kImported)
    return MakeError(fmt::format(
        "--activation-offload: {} is imported from its transformers code, whose blocks' "
        "checkpoint arguments are not recorded; offload is modelled for the families headroom "
        "builds",
        r.model.name));
  return std::nullopt;
}

}  // namespace

std::optional<Error> ValidateRequest(const PlanRequest& r) {
  using namespace limits;
  const TrainingConfig& c = r.config;
  for (auto [value, hi, flag] : {std::tuple{c.micro_batch, kMaxBatch, "--micro-batch"},
                                 {c.grad_accum_steps, kMaxBatch, "--grad-accum"},
                                 {c.seq_len, kMaxPositions, "--seq-len"}}) {
    if (auto error = CheckRange(value, 1, hi, flag)) return error;
  }
  if (c.seq_len > r.model.max_positions) {
    return MakeError(fmt::format("--seq-len {} is longer than {} supports ({} positions)",
                                 c.seq_len, r.model.name, r.model.max_positions));
  }
  const bool bf16 = c.precision == Precision::kAmpBf16 || c.precision == Precision::kBf16 ||
                    c.precision == Precision::kMixedBf16;
  if (bf16 && !r.device.supports_bf16()) {
    return MakeError(
        fmt::format("{} does not support bf16 (compute capability {:.1f} < 8.0); use amp-fp16 or "
                    "mixed-fp16",
                    r.device.name, r.device.compute_capability));
  }
  if (c.attention == AttentionImpl::kFlash2) {
    // transformers' flash_attention_2 needs flash-attn, a CUDA package for fp16/bf16.
    if (!r.device.is_cuda) return MakeError("--attention flash2 (flash-attn) runs on CUDA only");
    if (c.precision == Precision::kFp32)
      return MakeError("--attention flash2 (flash-attn) computes in fp16/bf16, not fp32");
    if (r.device.compute_capability < 8.0)
      return MakeError(fmt::format("--attention flash2 (flash-attn 2) needs sm80+; {} is sm{:.0f}",
                                   r.device.name, r.device.compute_capability * 10));
  }
  if (!c.kernel_packages.empty() && !r.device.is_cuda) {
    return MakeError(fmt::format(
        "--kernels {}: the packages' Triton kernels run on CUDA; on the CPU transformers runs "
        "its reference code",
        fmt::join(c.kernel_packages, ",")));
  }
  if (auto error = ValidateParallelism(c.parallel)) return error;
  if (auto error = UnmodelledScheme(c)) return error;
  const FineTuneConfig& ft = c.fine_tune;
  if (ft.mode != FineTuneMode::kFull) {
    if (auto error = CheckRange(ft.lora_rank, 1, kMaxLoraRank, "--lora-rank")) return error;
    if (!(ft.lora_dropout >= 0 && ft.lora_dropout < 1))
      return MakeError(fmt::format("--lora-dropout must be in [0, 1) (got {})", ft.lora_dropout));
    if (!(ft.lora_alpha > 0) || !std::isfinite(ft.lora_alpha))
      return MakeError(
          fmt::format("--lora-alpha must be a positive number (got {})", ft.lora_alpha));
  }
  if (ft.mode == FineTuneMode::kQLora && c.precision == Precision::kFp32) {
    return MakeError(
        "QLoRA computes in 16 bits: use --precision bf16, amp-bf16 or amp-fp16 with --qlora");
  }
  if (auto error = CheckLoss(r)) return error;
  if (auto error = CheckPacking(r)) return error;
  if (auto error = CheckActivationOffload(r)) return error;
  if (r.device.memory_bytes <= 0) return MakeError("the device memory budget must be positive");
  return std::nullopt;
}

Result<StepPrediction> Predict(const PlanRequest& request) {
  if (auto error = ValidateRequest(request)) return *error;
  auto graph = BuildGraph(request.model, GraphOptionsOf(request.config));
  if (!graph) return graph.error();
  auto checkpointed = request.config.checkpoint.Resolve(static_cast<int>(graph->blocks().size()));
  if (!checkpointed) return checkpointed.error();
  if (auto error = CheckStepSize(*graph, {request.config.micro_batch, request.config.seq_len}))
    return *error;
  return PredictStep(*graph, request.config, *checkpointed, request.device);
}

}  // namespace headroom
