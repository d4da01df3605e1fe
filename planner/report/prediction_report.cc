#include "planner/report/prediction_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/byte_units.h"
#include "planner/core/text_escape.h"

namespace headroom {
namespace {

std::string WithThousands(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::vector<int> CheckpointedIndices(const std::vector<bool>& flags) {
  std::vector<int> out;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i]) out.push_back(static_cast<int>(i));
  }
  return out;
}

// "0-3,7,9-11"
std::string IndexRanges(const std::vector<int>& sorted) {
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    out += (out.empty() ? "" : ",") +
           (j == i ? std::to_string(sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]));
    i = j + 1;
  }
  return out;
}

std::string JoinTargets(const std::vector<std::string>& targets) {
  if (targets.empty()) return "default targets";
  std::string out;
  for (const auto& t : targets) out += (out.empty() ? "" : ",") + t;
  return out;
}

}  // namespace

std::string DescribeFsdpPrecision(const TrainingConfig& c) {
  const std::optional<FsdpPolicy> policy = FsdpPolicyOf(c);
  const std::string autocast = RegimeOf(c).autocast ? "under torch.autocast" : "no autocast";
  if (!policy)
    return fmt::format("FSDP2 without a MixedPrecisionPolicy: gathered as stored, {}", autocast);
  return fmt::format(
      "FSDP2 MixedPrecisionPolicy(param_dtype={}, reduce_dtype={}){}: shards, their gradients "
      "and the optimizer states as stored, gathered and computed in {}, {}",
      DTypeName(policy->param_dtype),
      policy->reduce_dtype ? DTypeName(*policy->reduce_dtype) : "None",
      c.parallel.fsdp_param_dtype ? "" : ", accelerate's for bf16", DTypeName(policy->param_dtype),
      autocast);
}

std::string DescribeNodes(const Parallelism& p, const DeviceSpec& device) {
  const std::string links =
      p.nodes > 1 ? fmt::format("{:g} GB/s per GPU within a node, {:g} GB/s between nodes",
                                device.link_gbps, device.network_gbps)
                  : fmt::format("{:g} GB/s per GPU between them", device.link_gbps);
  return fmt::format("{} node{} x {} GPUs; the time assumes {}", p.nodes, p.nodes > 1 ? "s" : "",
                     p.gpus_per_node(), links);
}

std::string DescribeFineTune(const FineTuneConfig& ft) {
  switch (ft.mode) {
    case FineTuneMode::kFull:
      return "full fine-tune";
    case FineTuneMode::kLora:
      return fmt::format("LoRA rank {} on {}", ft.lora_rank, JoinTargets(ft.lora_targets));
    case FineTuneMode::kQLora:
      return fmt::format("QLoRA (NF4 base) rank {} on {}", ft.lora_rank,
                         JoinTargets(ft.lora_targets));
  }
  return "?";
}

namespace {

// What only some models take: the experts' routing, images, kernel packages; and a loss
// other than the model's own.
std::string ModelInputLines(const TrainingConfig& c) {
  std::string out;
  if (c.moe_routing) {
    out += fmt::format(
        "  experts' routing assumed {}: the same memory for any routing (transformers' grouped_mm "
        "experts keep one row per token-expert pair, neither dropped nor padded)\n",
        MoeRoutingName(*c.moe_routing));
  }
  if (c.images_per_sample > 0) {
    out += fmt::format("  {} image{} per sample, their tokens counted in the {}-token sequence\n",
                       c.images_per_sample, c.images_per_sample > 1 ? "s" : "", c.seq_len);
  }
  if (!c.kernel_packages.empty()) {
    out += fmt::format("  kernel packages: {} (transformers calls their kernels)\n",
                       fmt::join(c.kernel_packages, ", "));
  }
  if (c.packing == Packing::kPaddingFree) {
    out += fmt::format(
        "  padding-free rows of {} tokens (DataCollatorWithFlattening: position_ids restart per "
        "sample){}\n",
        c.seq_len,
        c.attention == AttentionImpl::kFlash2
            ? "; flash_attention_2 reads the samples' bounds from them (varlen), no mask"
        : MasksPackedSamples(c)
            ? "; SDPA takes a block-diagonal mask transformers makes from them"
            : ". With the DynamicCache transformers builds here (no checkpointing), it does not "
              "detect the packed samples: they attend across their boundaries and no mask is "
              "made (checkpoint, or pass use_cache=False)");
  }
  if (c.loss.chunked()) {
    out += fmt::format(
        "  loss {}: TRL's fused LM head (add_fused_lm_head, as SFTTrainer adds it), tiles of up "
        "to 4096 tokens x {} vocabulary entries; the logits are never whole\n",
        c.loss.ToString(), c.loss.vocab_tile);
  }
  return out;
}

// The request: model, device, configuration, parameter counts.
std::string RequestLines(const ReportInputs& in) {
  const StepPrediction& p = in.prediction;
  const TrainingConfig& c = in.config;
  std::string out;
  out += fmt::format("headroom plan: {} on {} ({})\n", TerminalEscaped(in.model_name),
                     in.device.name, FormatBytes(p.budget_bytes));
  out += fmt::format("  micro-batch {} x {} accumulation steps, sequence {}, {}, {}, {}\n",
                     c.micro_batch, c.grad_accum_steps, c.seq_len, PrecisionName(c.precision),
                     OptimizerName(c.optimizer), DescribeFineTune(c.fine_tune));
  out += fmt::format("  attention {}, checkpointed blocks: {} of {}\n", AttentionName(c.attention),
                     CheckpointedIndices(p.checkpointed).size(), p.checkpointed.size());
  out += fmt::format("  attention kernel {}{}\n", AttentionKernelName(in.attention_kernel.kernel),
                     in.attention_kernel.reason.empty() ? "" : ": " + in.attention_kernel.reason);
  if (const auto& w = in.window_attention_kernel) {
    out += fmt::format(
        "  sliding-window layers ({} of {}): attention kernel {}: {}; the sequence reaches the "
        "window, so transformers passes a bool mask, which each layer converts to an additive "
        "[b, 1, s, s] one\n",
        in.window_layers, in.num_layers, AttentionKernelName(w->kernel), w->reason);
  }
  for (const std::string& line : in.assumptions)
    out += fmt::format("  assumed: {}\n", TerminalEscaped(line));
  if (c.parallel.distributed()) {
    out += fmt::format(
        "  {} ranks ({}), sharding {}{}: the figures below are rank {}'s, "
        "{}\n",
        c.parallel.gpus, DescribeNodes(c.parallel, in.device), ShardingName(c.parallel.sharding),
        c.parallel.ddp_bucket_view ? " (gradients as bucket views)" : "", p.rank,
        c.parallel.rank ? "as asked (--rank)" : "the one holding the most");
    if (c.parallel.fsdp()) out += "  " + DescribeFsdpPrecision(c) + "\n";
  }
  if (c.parallel.offload != Offload::kNone) {
    out += fmt::format("  offload {}: {} of CPU RAM per rank hold what left the device\n",
                       OffloadName(c.parallel.offload), FormatBytes(p.offload_cpu_bytes));
  }
  if (c.activation_offload) {
    out += fmt::format(
        "  activation offload: the checkpointed blocks' inputs in {} of pinned host memory per "
        "rank (save_on_cpu), copied out in the forward and back for each block's backward\n",
        FormatBytes(p.activation_offload_host_bytes));
  }
  out += ModelInputLines(c);
  out += fmt::format("  stack {}, optimizer implementation {}", StackName(c.stack),
                     OptimizerImplName(EffectiveOptimizerImpl(c)));
  if (c.fine_tune.mode != FineTuneMode::kFull)
    out += fmt::format(", frozen base stored as {}", DTypeName(FrozenWeightDType(c)));
  if (!c.kernels.cuda)
    out += fmt::format(", CPU bf16 {} on {} thread(s)", CpuBf16Name(c.kernels.cpu_bf16),
                       c.kernels.cpu_threads);
  out += "\n";
  out += fmt::format("  parameters {} (trainable {})\n\n", WithThousands(p.params_total),
                     WithThousands(p.params_trainable));
  return out;
}

// The peak the verdict holds against the usable memory (PeakAgainstBudget).
int64_t JudgedPeak(const ReportInputs& in) {
  return in.device.PeakAgainstBudget(in.prediction.allocated_peak_bytes,
                                     in.prediction.device_peak_bytes);
}

// FITS, or by how much it does not, under the one rule stated here: the peak within the
// device's memory less the margin.
std::string VerdictLines(const ReportInputs& in) {
  const StepPrediction& p = in.prediction;
  const std::string rule = fmt::format("the {} usable: {:g}% of its memory kept free",
                                       FormatBytes(in.usable_bytes), 100.0 * in.margin);
  if (in.fits) {
    return fmt::format("FITS: {} of headroom left on {}, within {}\n\n",
                       FormatBytes(in.usable_bytes - JudgedPeak(in)), in.device.name, rule);
  }
  const int64_t shortfall = in.search && !in.search->feasible
                                ? in.search->shortfall_bytes
                                : std::max<int64_t>(JudgedPeak(in) - in.usable_bytes, 0);
  return fmt::format(
      "DOES NOT FIT: short by {} of {}{}\n\n", FormatBytes(shortfall), rule,
      p.oom_phase_text.empty() ? "" : " (out of memory at " + p.oom_phase_text + ")");
}

// The peak as each tool reports it, against the budget.
std::string PeakLines(const ReportInputs& in) {
  const StepPrediction& p = in.prediction;
  std::string out;
  out += fmt::format("  {:<18}{:>12}\n", "peak", "bytes");
  out += fmt::format("  {:<18}{:>12}   live tensors (max_memory_allocated)\n", "allocated",
                     FormatBytes(p.allocated_peak_bytes));
  if (in.device.is_cuda) {
    out += fmt::format("  {:<18}{:>12}   caching allocator segments (max_memory_reserved)\n",
                       "reserved", FormatBytes(p.reserved_peak_bytes));
    out += fmt::format("  {:<18}{:>12}   + CUDA context {} (nvidia-smi)\n", "device",
                       FormatBytes(p.device_peak_bytes), FormatBytes(in.device.context_bytes));
  }
  out += fmt::format("  {:<18}{:>12}\n\n", "budget", FormatBytes(p.budget_bytes));
  return out;
}

// The plan and its time estimate.
std::string PlanLines(const ReportInputs& in) {
  const StepPrediction& p = in.prediction;
  const TrainingConfig& c = in.config;
  std::string out;
  const auto ckpt = CheckpointedIndices(p.checkpointed);
  out += fmt::format(
      "  plan: micro-batch {} x {} accumulation{} = global batch {}, {}, {} of {} blocks "
      "checkpointed{}\n",
      c.micro_batch, c.grad_accum_steps,
      c.parallel.gpus > 1 ? fmt::format(" x {} ranks", c.parallel.gpus) : "", in.global_batch,
      PrecisionName(c.precision), ckpt.size(), p.checkpointed.size(),
      ckpt.empty() ? "" : fmt::format(" ({})", IndexRanges(ckpt)));
  if (!in.device.speed_basis) {
    out +=
        "  estimate: none: a --gpu-mem budget has no speed basis (plans are ranked as on an "
        "A100-class GPU; give --gpu NAME for a time)\n";
  } else {
    out += fmt::format(
        "  estimate: {:.3f} s per step, {:.0f} tokens/s{} (recomputation {:.1f}% of the step{})\n",
        in.time.step_seconds, in.time.tokens_per_second,
        c.parallel.gpus > 1 ? fmt::format(" over {} ranks, {:.0f} per rank", c.parallel.gpus,
                                          in.time.tokens_per_second_per_gpu)
                            : "",
        in.time.step_seconds > 0 ? 100.0 * static_cast<double>(c.grad_accum_steps) *
                                       in.time.recompute_seconds / in.time.step_seconds
                                 : 0.0,
        c.parallel.gpus > 1
            ? fmt::format(", communication not hidden {:.3f} s", in.time.communication_seconds)
            : "");
  }
  if (in.search) {
    out += fmt::format(
        "  solver: {:.3f} s, every plan verified by simulation{}\n", in.search->solver_seconds,
        in.search->corrections ? fmt::format(", {} budget correction{}", in.search->corrections,
                                             in.search->corrections == 1 ? "" : "s")
                               : "");
    if (!in.search->batch_note.empty()) out += "  note: " + in.search->batch_note + "\n";
    if (!in.search->schemes_note.empty()) out += "  note: " + in.search->schemes_note + "\n";
  }
  return out;
}

// Where the peak is, and what it is made of.
std::string PeakPlaceLines(const ReportInputs& in) {
  const StepPrediction& p = in.prediction;
  std::string out;
  out += "\n";
  out += fmt::format("  peak at: {}\n", p.peak_phase_text);
  out += fmt::format("  first step {} (optimizer states allocated), later steps {}\n\n",
                     FormatBytes(p.first_step_peak_bytes), FormatBytes(p.steady_step_peak_bytes));
  out += "  at the allocated peak:\n";
  for (int i = 0; i < kNumCategories; ++i) {
    const int64_t bytes = p.breakdown[i];
    const double pct = p.allocated_peak_bytes > 0 ? 100.0 * static_cast<double>(bytes) /
                                                        static_cast<double>(p.allocated_peak_bytes)
                                                  : 0;
    out += fmt::format("    {:<16}{:>12}  {:5.1f}%\n", CategoryName(static_cast<Category>(i)),
                       FormatBytes(bytes), pct);
  }
  if (in.device.is_cuda) {
    out += fmt::format("    {:<16}{:>12}  (reserved - allocated)\n", "allocator cache",
                       FormatBytes(p.reserved_peak_bytes - p.allocated_peak_bytes));
    out += fmt::format("    {:<16}{:>12}\n", "cuda context", FormatBytes(in.device.context_bytes));
  }
  return out;
}

}  // namespace

std::string FormatPredictionText(const ReportInputs& in) {
  return RequestLines(in) + VerdictLines(in) + PeakLines(in) + PlanLines(in) + PeakPlaceLines(in);
}

namespace {

nlohmann::json ConfigJson(const ReportInputs& in) {
  const StepPrediction& p = in.prediction;
  const TrainingConfig& c = in.config;
  nlohmann::json j;
  j["config"] = {
      {"micro_batch", c.micro_batch},
      {"grad_accum_steps", c.grad_accum_steps},
      {"seq_len", c.seq_len},
      {"precision", PrecisionName(c.precision)},
      {"optimizer", OptimizerName(c.optimizer)},
      {"fine_tune", FineTuneName(c.fine_tune.mode)},
      {"attention", AttentionName(c.attention)},
      {"attention_kernel", AttentionKernelName(in.attention_kernel.kernel)},
      {"attention_kernel_reason", in.attention_kernel.reason},
      {"window_attention_kernel",
       in.window_attention_kernel
           ? nlohmann::json(AttentionKernelName(in.window_attention_kernel->kernel))
           : nlohmann::json(nullptr)},
      {"assumptions", in.assumptions},
      {"checkpoint", c.checkpoint.ToString()},
      {"checkpointed_layers", CheckpointedIndices(p.checkpointed)},
      {"stack", StackName(c.stack)},
      {"optimizer_impl", OptimizerImplName(EffectiveOptimizerImpl(c))},
  };
  if (!c.kernels.cuda) {
    j["config"]["cpu_bf16"] = CpuBf16Name(c.kernels.cpu_bf16);
    j["config"]["cpu_threads"] = c.kernels.cpu_threads;
  }
  if (c.moe_routing) j["config"]["moe_routing"] = MoeRoutingName(*c.moe_routing);
  if (c.images_per_sample > 0) j["config"]["images_per_sample"] = c.images_per_sample;
  if (!c.kernel_packages.empty()) j["config"]["kernel_packages"] = c.kernel_packages;
  j["config"]["loss"] = c.loss.ToString();
  j["config"]["packing"] = PackingName(c.packing);
  j["config"]["activation_offload"] = c.activation_offload;
  if (c.fine_tune.mode != FineTuneMode::kFull) {
    j["config"]["lora_rank"] = c.fine_tune.lora_rank;
    j["config"]["lora_targets"] = c.fine_tune.lora_targets;
    j["config"]["base_dtype"] = DTypeName(FrozenWeightDType(c));
  }
  return j["config"];
}

nlohmann::json PeakJson(const StepPrediction& p) {
  nlohmann::json j;
  j["peak"] = {
      {"allocated_bytes", p.allocated_peak_bytes},
      {"reserved_bytes", p.reserved_peak_bytes},
      {"device_bytes", p.device_peak_bytes},
      {"phase", p.peak_phase_text},
      {"phase_kind", PhaseKindName(p.peak_phase.kind)},
      {"first_step_allocated_bytes", p.first_step_peak_bytes},
      {"steady_step_allocated_bytes", p.steady_step_peak_bytes},
      {"host_pinned_bytes", p.activation_offload_host_bytes},
  };
  if (!p.oom_phase_text.empty()) j["peak"]["oom_phase"] = p.oom_phase_text;
  return j["peak"];
}

nlohmann::json BreakdownJson(const ReportInputs& in) {
  const StepPrediction& p = in.prediction;
  nlohmann::json breakdown;
  for (int i = 0; i < kNumCategories; ++i) {
    breakdown[std::string(CategoryName(static_cast<Category>(i))) + "_bytes"] = p.breakdown[i];
  }
  breakdown["allocator_overhead_bytes"] = p.reserved_peak_bytes - p.allocated_peak_bytes;
  breakdown["cuda_context_bytes"] = in.device.ContextBytes();
  return breakdown;
}

}  // namespace

nlohmann::json PredictionJson(const ReportInputs& in) {
  const StepPrediction& p = in.prediction;
  const TrainingConfig& c = in.config;
  nlohmann::json j;
  j["fits"] = in.fits;
  j["budget_bytes"] = p.budget_bytes;
  j["margin"] = in.margin;
  j["usable_bytes"] = in.usable_bytes;
  j["headroom_bytes"] = in.usable_bytes - JudgedPeak(in);  // negative: short by as much
  j["model"] = in.model_name;
  j["device"] = in.device.name;
  j["config"] = ConfigJson(in);
  j["params"] = {{"total", p.params_total}, {"trainable", p.params_trainable}};
  j["peak"] = PeakJson(p);
  j["breakdown"] = BreakdownJson(in);
  j["plan"] = {{"micro_batch", c.micro_batch},
               {"grad_accum_steps", c.grad_accum_steps},
               {"global_batch", in.global_batch},
               {"checkpointed_layers", CheckpointedIndices(p.checkpointed)},
               {"precision", PrecisionName(c.precision)},
               {"gpus", c.parallel.gpus},
               {"nodes", c.parallel.nodes},
               {"sharding", ShardingName(c.parallel.sharding)},
               {"ddp_bucket_view", c.parallel.ddp_bucket_view},
               {"offload", OffloadName(c.parallel.offload)},
               {"fsdp_wrap", NameIn(kFsdpWrapNames, c.parallel.fsdp_wrap)}};
  if (const std::optional<FsdpPolicy> policy = FsdpPolicyOf(c)) {
    j["plan"]["fsdp_param_dtype"] = DTypeName(policy->param_dtype);
    j["plan"]["fsdp_reduce_dtype"] =
        policy->reduce_dtype ? nlohmann::json(DTypeName(*policy->reduce_dtype)) : nlohmann::json();
  }
  j["plan"]["autocast"] = RegimeOf(c).autocast;
  j["offload"] = {{"cpu_bytes", p.offload_cpu_bytes}};
  j["peak"]["per_rank"] = {{"rank", p.rank},
                           {"allocated_bytes", p.allocated_peak_bytes},
                           {"reserved_bytes", p.reserved_peak_bytes},
                           {"device_bytes", p.device_peak_bytes}};
  j["estimate"] = nullptr;  // a --gpu-mem budget: no time
  if (in.device.speed_basis)
    j["estimate"] = {{"step_seconds", in.time.step_seconds},
                     {"tokens_per_second", in.time.tokens_per_second},
                     {"tokens_per_second_per_gpu", in.time.tokens_per_second_per_gpu},
                     {"communication_seconds", in.time.communication_seconds},
                     {"forward_seconds", in.time.forward_seconds},
                     {"backward_seconds", in.time.backward_seconds},
                     {"recompute_seconds", in.time.recompute_seconds},
                     {"optimizer_seconds", in.time.optimizer_seconds}};
  if (in.search) {
    j["solver"] = {{"seconds", in.search->solver_seconds},
                   {"usable_bytes", in.search->usable_bytes},
                   {"corrections", in.search->corrections}};
    if (!in.search->batch_note.empty()) j["solver"]["batch_note"] = in.search->batch_note;
    if (!in.search->schemes_note.empty()) j["solver"]["schemes_note"] = in.search->schemes_note;
    if (!in.search->feasible) j["solver"]["shortfall_bytes"] = in.search->shortfall_bytes;
  }
  return j;
}

}  // namespace headroom
