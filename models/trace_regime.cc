// The regime an imported graph was recorded under, and the one a plan asks for.
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/graph_file.h"

namespace headroom {

TraceRegime TraceRegimeOf(const GraphOptions& options) {
  TraceRegime r;
  const KernelTarget& target = options.attention_call.device;
  r.device = target.cuda ? "cuda" : "cpu";
  // A GPU of unknown capability plans as sm80, as attention_kernel_choice.cc does.
  if (target.cuda)
    r.sm = std::lround(10 * (target.compute_capability > 0 ? target.compute_capability : 8.0));
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
  return out;
}

}  // namespace headroom
