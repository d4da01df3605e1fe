// The regime an imported graph was recorded under, and the one a plan asks for.
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/graph_file.h"

namespace headroom {

// One compute capability for all GPUs on which PyTorch 2.15 picks SDPA kernels alike, so
// that GPUs of one class share an import. The checks that differ between capabilities
// (attention_kernel_choice.cc, and fake_cuda_semantics.py's pick_kernel for the import):
// cuDNN first on majors 9 and 10; flash and bf16 from sm80; flash's head-size limit on
// sm86-89 and sm12x; the efficient kernel's alignment on major 7; nothing fused before
// sm50. A GPU of unknown capability plans as sm80, as attention_kernel_choice.cc does.
int64_t SdpaCapabilityClass(double compute_capability) {
  const int64_t sm = std::lround(10 * (compute_capability > 0 ? compute_capability : 8.0));
  if (sm >= 90 && sm < 110) return 90;
  if ((sm >= 86 && sm <= 89) || sm >= 120) return 86;
  if (sm >= 80) return 80;
  if (sm >= 70) return 70;
  return sm >= 50 ? 50 : sm;
}

TraceRegime TraceRegimeOf(const GraphOptions& options) {
  TraceRegime r;
  const KernelTarget& target = options.attention_call.device;
  r.device = target.cuda ? "cuda" : "cpu";
  if (target.cuda) r.sm = SdpaCapabilityClass(target.compute_capability);
  r.precision = std::string(PrecisionName(options.precision));
  const FineTuneConfig& ft = options.fine_tune;
  r.mode = std::string(FineTuneName(ft.mode));
  if (ft.mode != FineTuneMode::kFull) {
    r.lora_rank = ft.lora_rank;
    r.lora_targets = ft.lora_targets;
    // The frozen base as loaded (FrozenWeightDType).
    r.base_dtype = DTypeName(options.base_dtype.value_or(RegimeOf(options.precision).frozen_dtype));
  }
  r.attention = std::string(AttentionName(options.attention_call.impl));
  r.stack = std::string(StackName(options.stack));
  r.kv_cache = options.kv_cache;
  r.images = options.images_per_sample;
  r.kernels = options.kernel_packages;
  return r;
}

std::string DescribeRegime(const TraceRegime& r) {
  std::string out = fmt::format("{} on {}", r.precision, r.device);
  if (r.sm > 0) out += fmt::format(" (sm{})", r.sm);
  if (r.mode == "full") {
    out += ", full fine-tune";
  } else {
    out += fmt::format(", {} r{} ({})", r.mode, r.lora_rank, fmt::join(r.lora_targets, ", "));
    if (!r.base_dtype.empty()) out += ", base " + r.base_dtype;
  }
  out += fmt::format(", {} attention, {} stack, {}", r.attention, r.stack,
                     r.kv_cache ? "KV cache" : "no KV cache (checkpointing)");
  if (r.min_seq_len > 0) out += fmt::format(", sequences from {}", r.min_seq_len);
  if (r.seq_multiple > 0) out += fmt::format(", multiples of {} tokens", r.seq_multiple);
  if (!r.kernels.empty()) out += fmt::format(", {} kernels", fmt::join(r.kernels, ", "));
  if (r.images > 0)
    out += fmt::format(", {} image{} per sample", r.images, r.images > 1 ? "s" : "");
  return out;
}

}  // namespace headroom
