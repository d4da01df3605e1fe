#include "planner/core/training_config.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/limits.h"
#include "planner/core/number_parse.h"
#include "planner/core/text_escape.h"

namespace headroom {

PrecisionRegime RegimeOf(Precision p) {
  using enum DType;
  //       weights  compute autocast master scaling states frozen
  switch (p) {
    case Precision::kFp32:
      return {kF32, kF32, false, false, false, kF32, kF32};
    case Precision::kAmpBf16:
      return {kF32, kBF16, true, false, false, kF32, kBF16};
    case Precision::kAmpFp16:
      return {kF32, kF16, true, false, true, kF32, kF16};
    case Precision::kBf16:
      return {kBF16, kBF16, false, false, false, kBF16, kBF16};
    case Precision::kMixedBf16:
      return {kBF16, kBF16, false, true, false, kF32, kBF16};
    case Precision::kMixedFp16:
      return {kF16, kF16, false, true, true, kF32, kF16};
  }
  throw std::logic_error("RegimeOf: unknown precision");
}

bool FsdpThroughAccelerate(const TrainingConfig& config) {
  return config.parallel.fsdp() &&
         (config.stack == Stack::kHfTrainer || config.parallel.fsdp_wrap == FsdpWrap::kAccelerate);
}

std::optional<FsdpPolicy> FsdpPolicyOf(const TrainingConfig& config) {
  const Parallelism& p = config.parallel;
  if (!p.fsdp()) return std::nullopt;
  if (p.fsdp_param_dtype) return FsdpPolicy{*p.fsdp_param_dtype, p.fsdp_reduce_dtype};
  if (FsdpThroughAccelerate(config) && config.precision == Precision::kAmpBf16)
    return FsdpPolicy{DType::kBF16, DType::kBF16};
  return std::nullopt;
}

PrecisionRegime RegimeOf(const TrainingConfig& config) {
  PrecisionRegime regime = RegimeOf(config.precision);
  if (FsdpThroughAccelerate(config)) regime.autocast = false;
  if (const std::optional<FsdpPolicy> policy = FsdpPolicyOf(config))
    regime.compute_dtype = policy->param_dtype;
  return regime;
}

DType AdapterDType(const PrecisionRegime& regime) {
  return regime.autocast ? DType::kF32 : regime.param_dtype;
}

OptimizerImpl EffectiveOptimizerImpl(const TrainingConfig& config) {
  if (config.optimizer_impl) return *config.optimizer_impl;
  switch (config.stack) {
    case Stack::kPytorch:
      return config.kernels.cuda ? OptimizerImpl::kForeach : OptimizerImpl::kForLoop;
    case Stack::kHfTrainer:
      return OptimizerImpl::kFused;
    case Stack::kHeadroom:
      return OptimizerImpl::kForLoop;
  }
  return OptimizerImpl::kForLoop;
}

DType FrozenWeightDType(const TrainingConfig& config) {
  return config.base_dtype.value_or(RegimeOf(config.precision).frozen_dtype);
}

std::optional<Error> UnmodelledScheme(const TrainingConfig& c) {
  if (FsdpThroughAccelerate(c) && !c.parallel.fsdp_param_dtype && c.precision != Precision::kFp32 &&
      c.precision != Precision::kAmpBf16 && c.precision != Precision::kBf16)
    return MakeError(fmt::format(
        "FSDP2 through accelerate with {} is not modelled (accelerate's fp16 policy and its "
        "gradient scaler, or DeepSpeed-style master weights); use amp-bf16, bf16 or fp32",
        PrecisionName(c.precision)));
  if (c.loss.chunked() && (c.parallel.fsdp() || c.parallel.sharding == Sharding::kZero3))
    return MakeError(fmt::format(
        "--loss chunked with --sharding {} is not modelled: TRL's fused LM head gathers "
        "lm_head.weight whole for every call (DTensor.full_tensor under FSDP2, "
        "maybe_gather_lm_head_ctx under ZeRO-3); use ddp, zero1 or zero2, or --loss full",
        ShardingName(c.parallel.sharding)));
  if (c.fine_tune.mode != FineTuneMode::kQLora) return std::nullopt;
  if (c.parallel.sharding == Sharding::kZero3)
    return MakeError(
        "--sharding zero3 with QLoRA (ZeRO-3 partitioning 4-bit NF4 weights) is not modelled; "
        "use --lora-rank, or --sharding zero2 or ddp");
  return std::nullopt;
}

bool KeepsKvCache(const TrainingConfig& config) {
  return RunsPythonStack(config.stack) && config.checkpoint.kind == CheckpointPolicy::Kind::kNone &&
         !config.loss.chunked();
}

bool MasksPackedSamples(const TrainingConfig& config) {
  return config.packing == Packing::kPaddingFree && RunsPythonStack(config.stack) &&
         !KeepsKvCache(config);
}

namespace {

std::optional<int> ParseInt(std::string_view s) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

Result<std::vector<std::string>> ParseKernelPackages(std::vector<std::string> names) {
  for (const std::string& name : names) {
    if (std::find(std::begin(kKernelPackages), std::end(kKernelPackages), name) ==
        std::end(kKernelPackages)) {
      return MakeError(fmt::format("--kernels {}: the kernel packages planned are {}",
                                   TerminalEscaped(name), fmt::join(kKernelPackages, ", ")));
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Result<std::vector<std::string>> ParseKernelPackages(std::string_view text) {
  std::vector<std::string> names;
  // A plain loop: clang 14's <ranges> cannot split a string_view on libstdc++ 12.
  for (size_t begin = 0; begin <= text.size();) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    if (comma > begin) names.emplace_back(text.substr(begin, comma - begin));
    begin = comma + 1;
  }
  return ParseKernelPackages(std::move(names));
}

Result<MoeRouting> ParseMoeRouting(std::string_view text) {
  constexpr std::string_view kCapacity = "capacity:";
  if (text.substr(0, kCapacity.size()) != kCapacity) {
    auto routing = ParseIn(kMoeRoutingNames, text, "routing");
    if (!routing)
      return MakeError(
          fmt::format("--moe-routing {}: use balanced, worst-case or capacity:F", text));
    return routing;
  }
  auto factor = ParseReal(text.substr(kCapacity.size()), 1e-9, 1e9,
                          "--moe-routing capacity:F (the capacity factor)");
  if (!factor) return factor.error();
  return MakeError(fmt::format(
      "--moe-routing {}: a capacity factor limits what each expert receives (GShard-style "
      "dispatch: DeepSpeed-MoE, Megatron's --moe-expert-capacity-factor), and no stack headroom "
      "plans for has one: transformers' grouped_mm experts and headroom's runtime drop and pad "
      "no tokens, so their memory is the same for every routing; use balanced or worst-case",
      text));
}

Result<CheckpointPolicy> CheckpointPolicy::Parse(std::string_view text) {
  CheckpointPolicy p;
  if (text == "none") return p;
  if (text == "all") {
    p.kind = Kind::kAll;
    return p;
  }
  const std::string usage = "use none, all, every:N or layers:0,2,5-7";
  if (text.starts_with("every:")) {
    auto n = ParseInt(text.substr(6));
    if (!n || *n <= 0)
      return MakeError(fmt::format("--checkpoint '{}': N must be a positive integer", text));
    p.kind = Kind::kEvery;
    p.every = *n;
    return p;
  }
  if (text.starts_with("layers:")) {
    p.kind = Kind::kLayers;
    std::string_view rest = text.substr(7);
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      size_t dash = item.find('-');
      auto lo = ParseInt(item.substr(0, dash));
      auto hi = dash == std::string_view::npos ? lo : ParseInt(item.substr(dash + 1));
      if (!lo || !hi || *lo < 0 || *hi < *lo) {
        return MakeError(
            fmt::format("--checkpoint '{}': '{}' is not a layer index or range", text, item));
      }
      if (*hi >= limits::kMaxLayers) {
        return MakeError(
            fmt::format("--checkpoint '{}': layer {} is past the {} layers a model "
                        "may have",
                        text, *hi, limits::kMaxLayers));
      }
      for (int i = *lo; i <= *hi; ++i) p.layers.push_back(i);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    if (p.layers.empty()) return MakeError(fmt::format("--checkpoint '{}': no layers given", text));
    return p;
  }
  return MakeError(fmt::format("--checkpoint '{}' is not understood; {}", text, usage));
}

Result<std::vector<bool>> CheckpointPolicy::Resolve(int num_blocks) const {
  std::vector<bool> flags(num_blocks, false);
  switch (kind) {
    case Kind::kNone:
      break;
    case Kind::kAll:
      flags.assign(num_blocks, true);
      break;
    case Kind::kEvery:
      for (int i = 0; i < num_blocks; i += every) flags[i] = true;
      break;
    case Kind::kLayers:
      for (int l : layers) {
        if (l >= num_blocks) {
          return MakeError(
              fmt::format("--checkpoint: layer {} does not exist (the model has layers 0-{})", l,
                          num_blocks - 1));
        }
        flags[l] = true;
      }
      break;
  }
  return flags;
}

Result<LossConfig> LossConfig::Parse(std::string_view text) {
  LossConfig loss;
  if (text == "full") return loss;
  loss.kind = Kind::kChunked;
  if (text == "chunked") return loss;
  const std::string usage = "use full, chunked or chunked:N (N vocabulary entries per tile)";
  if (!text.starts_with("chunked:")) return MakeError(fmt::format("--loss '{}': {}", text, usage));
  auto n = ParseInt(text.substr(8));
  if (!n || *n <= 0)
    return MakeError(fmt::format("--loss '{}': N must be a positive integer; {}", text, usage));
  loss.vocab_tile = *n;
  return loss;
}

std::string LossConfig::ToString() const {
  if (!chunked()) return "full";
  return vocab_tile == kDefaultVocabTile ? "chunked" : fmt::format("chunked:{}", vocab_tile);
}

std::string CheckpointPolicy::ToString() const {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kAll:
      return "all";
    case Kind::kEvery:
      return fmt::format("every:{}", every);
    case Kind::kLayers: {
      std::string s = "layers:";
      for (size_t i = 0; i < layers.size(); ++i) s += (i ? "," : "") + std::to_string(layers[i]);
      return s;
    }
  }
  return "?";
}

CheckpointPolicy CheckpointPolicy::Of(const std::vector<bool>& flags) {
  CheckpointPolicy p;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i]) p.layers.push_back(static_cast<int>(i));
  }
  if (p.layers.empty()) return p;
  if (p.layers.size() == flags.size()) {
    p.kind = Kind::kAll;
    p.layers.clear();
  } else {
    p.kind = Kind::kLayers;
  }
  return p;
}

}  // namespace headroom
