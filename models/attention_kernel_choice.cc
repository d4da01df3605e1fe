#include "models/attention_kernel_choice.h"

#include <cmath>

#include <fmt/format.h>

namespace headroom {
namespace {

bool Is16Bit(DType d) { return d == DType::kBF16 || d == DType::kF16; }

// The GPU's compute capability; 0 (unknown) plans a current data-centre GPU, sm80.
double CapabilityOf(const KernelTarget& device) {
  return device.compute_capability > 0 ? device.compute_capability : 8.0;
}
int Major(double cc) { return static_cast<int>(cc); }

// What the kernel checks of one call: the facts every backend's constraints read.
struct SdpParams {
  const ModelSpec& model;
  const AttentionCall& call;
  double cc;
  double dropout;
  bool grouped;     // fewer K/V heads than query heads reach the kernel
  bool enable_gqa;  // passed by transformers

  int64_t d() const { return model.head_dim; }
};

// check_prefer_cudnn_attention: with cuDNN > 9.15 (the pinned wheel bundles 9.26) and a
// CUDA >= 13 build, sm90 and sm10x try cuDNN before flash.
bool PrefersCudnn(double cc) { return Major(cc) == 9 || Major(cc) == 10; }

// can_use_cudnn_attention: fp16/bf16, sm80..sm121, head_dim a multiple of 8 and <= 128,
// dropout a multiple of 1/16. (check_cudnn_tensor_shapes raises the limit to 256 on
// sm90/sm10x only with a cudnn-frontend >= 1.24, which the wheel does not say it bundles:
// not assumed.)
std::optional<std::string> CudnnRejects(const SdpParams& p) {
  if (!Is16Bit(p.call.dtype)) return "cuDNN takes fp16/bf16 only";
  if (p.d() % 8 != 0) return "cuDNN needs a head size that is a multiple of 8";
  if (p.d() > 128) return fmt::format("cuDNN's head-size limit is 128 (got {})", p.d());
  const double sixteenths = p.dropout * 16;
  if (sixteenths != std::floor(sixteenths))
    return fmt::format("cuDNN takes dropout in multiples of 1/16 (got {})", p.dropout);
  return std::nullopt;
}

// can_use_flash_attention: no attn_mask, fp16/bf16, sm80..sm121, head_dim <= 256 (on
// sm86/89/12x with grad: <= 192, or > 224 without dropout), grouped K/V only with
// enable_gqa.
std::optional<std::string> FlashRejects(const SdpParams& p) {
  if (!Is16Bit(p.call.dtype)) return "PyTorch has no flash kernel for fp32";
  if (p.cc < 8.0) return fmt::format("flash needs sm80+ (this GPU is sm{:.0f})", p.cc * 10);
  if (p.call.masked) return "flash takes no attn_mask";
  if (p.d() > 256) return fmt::format("flash's head-size limit is 256 (got {})", p.d());
  const int sm = static_cast<int>(std::lround(p.cc * 10));
  const bool consumer = (sm >= 86 && sm <= 89) || sm >= 120;
  if (consumer && p.call.training && p.d() > 192 && !(p.d() > 224 && p.dropout == 0))
    return fmt::format("flash backward on sm{} takes head size <= 192 (got {})", sm, p.d());
  if (p.grouped && !p.enable_gqa) return "grouped K/V without enable_gqa";
  return std::nullopt;
}

// can_use_mem_efficient_attention: sm50+, fp32/fp16 (bf16 on sm80+), head_dim a multiple
// of the GEMM alignment; masks, dropout and grouped K/V (enable_gqa) accepted in 2.15
// (its dense check is check_batch_size_and_num_heads_dense<true, true, true>).
std::optional<std::string> MemEfficientRejects(const SdpParams& p) {
  if (p.cc < 5.0) return "the memory-efficient kernel needs sm50+";
  if (p.call.dtype == DType::kBF16 && p.cc < 8.0) return "bf16 needs sm80+";
  const int64_t alignment = p.cc >= 8.0 ? (Is16Bit(p.call.dtype) ? 8 : 4)
                            : Major(p.cc) == 7 && Is16Bit(p.call.dtype) ? 8
                                                                        : 1;
  if (p.d() % alignment != 0)
    return fmt::format("the memory-efficient kernel needs a head size that is a multiple of {}",
                       alignment);
  if (p.grouped && !p.enable_gqa) return "grouped K/V without enable_gqa";
  return std::nullopt;
}

AttentionKernelChoice ChooseCuda(const SdpParams& p, bool repeats_kv) {
  const std::string dtype(DTypeName(p.call.dtype));
  std::string skipped;
  auto note = [&](const std::optional<std::string>& why) {
    if (why) skipped += (skipped.empty() ? "" : "; ") + *why;
  };
  if (PrefersCudnn(p.cc)) {
    const auto why = CudnnRejects(p);
    if (!why)
      return {
          AttentionKernel::kCudnn, repeats_kv,
          fmt::format("{} on sm{:.0f}: PyTorch 2.15 tries cuDNN first there", dtype, p.cc * 10)};
    note(why);
  }
  const auto flash = FlashRejects(p);
  if (!flash) {
    return {AttentionKernel::kFlash, repeats_kv,
            skipped.empty() ? fmt::format("{}, no mask, head size {}", dtype, p.d())
                            : fmt::format("{}, no mask ({})", dtype, skipped)};
  }
  note(flash);
  const auto efficient = MemEfficientRejects(p);
  if (!efficient) {
    return {AttentionKernel::kMemEfficient, repeats_kv,
            fmt::format("{}; the memory-efficient kernel takes {}{}", skipped, dtype,
                        p.grouped ? " and grouped K/V (enable_gqa, torch 2.15)" : "")};
  }
  note(efficient);
  return {AttentionKernel::kMath, repeats_kv, skipped + "; the math fallback takes anything"};
}

}  // namespace

AttentionCall AttentionCallOf(const TrainingConfig& config) {
  return {.impl = config.attention,
          .device = config.kernels,
          .dtype = RegimeOf(config).compute_dtype,
          .python_stack = RunsPythonStack(config.stack),
          .masked = MasksPackedSamples(config) && config.attention == AttentionImpl::kSdpa};
}

AttentionKernelChoice ChooseAttentionKernel(const ModelSpec& model, const AttentionCall& call) {
  const bool grouped_model = model.num_kv_heads != model.num_heads;
  if (call.impl == AttentionImpl::kEager)
    return {AttentionKernel::kEager, grouped_model, "attn_implementation=eager"};
  if (call.impl == AttentionImpl::kFlash2)
    return {AttentionKernel::kFlashAttn2, false,
            "attn_implementation=flash_attention_2 (the flash-attn package)"};
  // transformers' use_gqa_in_sdpa: enable_gqa without a mask and with head_dim <= 256;
  // otherwise repeat_kv copies K/V to every query head first.
  const bool enable_gqa =
      grouped_model && call.python_stack && !call.masked && model.head_dim <= 256;
  const bool repeats_kv = grouped_model && !enable_gqa;
  const SdpParams p{model,
                    call,
                    CapabilityOf(call.device),
                    model.attention_dropout,
                    grouped_model && !repeats_kv,
                    enable_gqa};
  if (!call.device.cuda) {
    // select_sdp_backend_cpp: flash for every dtype, mask and grouped K/V; math only with
    // dropout (which the request already plans as eager attention: AttentionAsExecuted).
    if (p.dropout > 0) return {AttentionKernel::kMath, repeats_kv, "CPU flash takes no dropout"};
    return {AttentionKernel::kCpuFlash, repeats_kv, "the CPU's SDPA kernel without dropout"};
  }
  return ChooseCuda(p, repeats_kv);
}

bool SdpaTakesWindowMask(const ModelSpec& model, AttentionImpl impl, int64_t seq_len) {
  return impl == AttentionImpl::kSdpa && model.sliding_window > 0 &&
         seq_len >= model.sliding_window;
}

std::optional<AttentionKernelChoice> ChooseWindowAttentionKernel(const ModelSpec& model,
                                                                 const TrainingConfig& config) {
  if (!SdpaTakesWindowMask(model, config.attention, config.seq_len)) return std::nullopt;
  AttentionCall call = AttentionCallOf(config);
  call.masked = true;
  return ChooseAttentionKernel(model, call);
}

}  // namespace headroom
