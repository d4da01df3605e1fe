#include "cli/plan_flags.h"

#include <charconv>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/numeric_option.h"
#include "models/catalog.h"
#include "planner/core/byte_units.h"
#include "planner/core/file_io.h"
#include "planner/core/gpu_catalog.h"
#include "planner/core/limits.h"
#include "planner/core/text_escape.h"
#include "planner/report/plan_report.h"

namespace headroom {
namespace {

template <typename E, size_t N>
std::string Choices(const EnumName<E> (&table)[N]) {
  return ChoiceList(NamesIn(table), " | ", " | ");
}

// An option whose value is a name from `table`, stored in `target` (E or optional<E>).
template <typename E, size_t N, typename Target>
CLI::Option* AddEnumOption(CLI::App& cmd, const std::string& flag, Target& target,
                           const EnumName<E> (&table)[N], const std::string& help) {
  auto store = [&target, &table](const std::string& text) { target = *ParseIn(table, text, ""); };
  return cmd.add_option_function<std::string>(flag, store, help)
      ->check(CLI::IsMember(NamesIn(table)));
}

void AddPrecisionFlag(CLI::App& cmd, PlanFlags& f) {
  std::vector<std::string> names = NamesIn(kPrecisionNames);
  names.push_back("auto");
  auto store = [&f](const std::string& text) {
    f.solve_precision = text == "auto";
    if (!f.solve_precision) f.precision = *ParsePrecision(text);
  };
  cmd.add_option_function<std::string>(
         "--precision", store,
         Choices(kPrecisionNames) +
             " | auto (the solver picks; default amp-bf16, amp-fp16 without bf16)")
      ->check(CLI::IsMember(names));
}

void AddLoraFlags(CLI::App& cmd, PlanFlags& f) {
  AddIntegerOption(cmd, "--lora-rank", f.lora_rank, 1, limits::kMaxLoraRank,
                   "Train LoRA adapters of this rank (frozen base)");
  AddRealOption(cmd, "--lora-alpha", f.lora_alpha, 1e-9, 1e9, "LoRA alpha (default 2 x rank)");
  AddRealOption(cmd, "--lora-dropout", f.lora_dropout, 0, 0.99,
                "Dropout on the LoRA input, in [0, 0.99] (default 0)");
  cmd.add_option("--lora-targets", f.lora_targets,
                 "Linear layers with adapters, e.g. q,v or q_proj,v_proj")
      ->delimiter(',');
  cmd.add_flag(
      "--qlora", f.qlora,
      "QLoRA: 4-bit NF4 base weights with LoRA adapters (rank from --lora-rank, default 16)");
  auto base_dtype = [&f](const std::string& text) { f.base_dtype = ParseDType(text); };
  auto floating = [](std::string& text) {
    return ParseDType(text) ? std::string() : "'" + text + "' is not fp32, bf16 or fp16";
  };
  cmd.add_option_function<std::string>(
         "--base-dtype", base_dtype,
         "LoRA/QLoRA: the dtype the frozen base model is loaded in: fp32 | bf16 | fp16 "
         "(default: the 16-bit compute dtype under AMP, else the precision's)")
      ->check(CLI::Validator(floating, "DTYPE"));
}

void AddStackFlags(CLI::App& cmd, PlanFlags& f) {
  AddEnumOption(cmd, "--stack", f.stack, kStackNames,
                "The training code that runs the plan: pytorch (a plain loop) | hf-trainer | "
                "headroom (`headroom train`); sets the defaults below (default: pytorch)");
  AddEnumOption(cmd, "--optimizer-impl", f.optimizer_impl, kOptimizerImplNames,
                Choices(kOptimizerImplNames) +
                    " (default: the stack's; torch.optim uses foreach on CUDA and a loop on the "
                    "CPU, HF Trainer fused)");
  AddEnumOption(cmd, "--cpu-bf16", f.cpu_bf16, kCpuBf16Names,
                "With --device cpu, how its bf16 matmuls run: " + Choices(kCpuBf16Names) +
                    " (native = amx; default: this machine's CPU)");
  cmd.add_option("--cpu-threads", f.cpu_threads,
                 "With --device cpu, torch's intra-op threads (default: OMP_NUM_THREADS, else "
                 "this machine's physical cores, as torch starts)")
      ->check(CLI::PositiveNumber);
}

// FSDP2's MixedPrecisionPolicy. The flags parse a dtype; which dtypes a policy takes is
// ValidateParallelism's (plan files go through it too).
void AddFsdpPolicyFlags(CLI::App& cmd, PlanFlags& f) {
  const auto mp_dtype = [](std::optional<DType>& out) {
    return [&out](const std::string& text) { out = ParseDType(text); };
  };
  const auto mp_check = [](std::string& text) {
    return ParseDType(text) ? std::string() : "'" + text + "' is not a dtype (bf16, fp16, fp32)";
  };
  cmd.add_option_function<std::string>(
         "--fsdp-param-dtype", mp_dtype(f.fsdp_param_dtype),
         "FSDP2 MixedPrecisionPolicy param_dtype: shards cast to it and gathered, the units "
         "computing in it (default: none; accelerate's bf16 with --stack hf-trainer or "
         "--fsdp-wrap accelerate and amp-bf16)")
      ->check(CLI::Validator(mp_check, "DTYPE"));
  cmd.add_option_function<std::string>(
         "--fsdp-reduce-dtype", mp_dtype(f.fsdp_reduce_dtype),
         "FSDP2 MixedPrecisionPolicy reduce_dtype of the reduce-scatter (default: the "
         "parameters' own, as torch 2.15 follows grad_dtype)")
      ->check(CLI::Validator(mp_check, "DTYPE"));
}

void AddParallelFlags(CLI::App& cmd, PlanFlags& f) {
  auto gpus = [&f](const std::string& text) {
    f.gpus_auto = text == "auto";
    if (!f.gpus_auto) f.gpus = std::stoll(text);
  };
  auto count_or_auto = [](std::string& text) -> std::string {
    if (text == "auto") return "";
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > limits::kMaxGpus)
      return fmt::format("'{}' is not auto or a count in [1, {}]", text, limits::kMaxGpus);
    return "";
  };
  cmd.add_option_function<std::string>(
         "--gpus", gpus,
         "Data-parallel ranks (GPUs, or CPU processes with --device cpu), or auto: the fewest "
         "that fit, with the fastest sharding there (default 1); the plan is per rank")
      ->check(CLI::Validator(count_or_auto, "N|auto"));
  AddIntegerOption(cmd, "--max-gpus", f.max_gpus, 1, limits::kMaxGpus,
                   "With --gpus auto: the most ranks to consider (default 1024)");
  AddIntegerOption(cmd, "--nodes", f.nodes, 1, limits::kMaxGpus,
                   fmt::format("Machines the ranks are spread over (default: the fewest of at "
                               "most {} GPUs each that hold --gpus evenly; 16: 2 nodes of 8)",
                               kGpusPerNode));
  AddEnumOption(cmd, "--sharding", f.sharding, kShardingNames,
                "How ranks split the model state: " + Choices(kShardingNames) +
                    " (default: none on one rank)");
  cmd.add_flag("--ddp-bucket-view", f.ddp_bucket_view,
               "DDP(gradient_as_bucket_view=True): gradients live in DDP's buckets");
  AddIntegerOption(cmd, "--rank", f.rank, 0, limits::kMaxGpus - 1,
                   "Replay this rank instead of the busiest (ranks differ under zero1 and "
                   "zero2: the partition each owns)");
  AddEnumOption(cmd, "--fsdp-wrap", f.fsdp_wrap, kFsdpWrapNames,
                "FSDP2 units: blocks (fully_shard per block, then the root) or accelerate "
                "(its own: embedding and head apart; default with --stack hf-trainer and "
                "--emit accelerate-fsdp|hf)");
  AddFsdpPolicyFlags(cmd, f);
  AddEnumOption(cmd, "--offload", f.offload, kOffloadNames,
                "What lives in CPU RAM instead of the GPU: " + Choices(kOffloadNames) +
                    " (default none; reported as offload.cpu_bytes)");
  // DeepSpeed's zero_optimization values (in elements), written into --emit deepspeed.
  DeepSpeedZeroKnobs& ds = f.deepspeed;
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  AddIntegerOption(cmd, "--ds-reduce-bucket-size", ds.reduce_bucket_size, 1, kMaxElements,
                   "ZeRO: gradient bucket, in elements (default 500000000)");
  AddIntegerOption(cmd, "--ds-allgather-bucket-size", ds.allgather_bucket_size, 1, kMaxElements,
                   "ZeRO-1/2: parameter all-gather bucket, in elements (default 500000000)");
  cmd.add_option("--ds-overlap-comm", ds.overlap_comm,
                 "ZeRO: overlap_comm true|false (default: true for zero3 only)");
  AddIntegerOption(cmd, "--ds-stage3-prefetch-bucket-size", ds.stage3_prefetch_bucket_size, 0,
                   kMaxElements,
                   "ZeRO-3: parameters prefetched ahead, in elements (default 50000000)");
  AddIntegerOption(cmd, "--ds-stage3-max-live-parameters", ds.stage3_max_live_parameters, 0,
                   kMaxElements,
                   "ZeRO-3: most gathered parameters, in elements (default 1000000000)");
  AddIntegerOption(cmd, "--ds-stage3-param-persistence-threshold",
                   ds.stage3_param_persistence_threshold, 0, kMaxElements,
                   "ZeRO-3: parameters this small stay gathered (default 100000)");
}

void AddSolverFlags(CLI::App& cmd, PlanFlags& f) {
  AddSolverChoiceFlags(
      cmd, f, "Solve for the fastest plan that fits (implied when --micro-batch is not given)");
  cmd.add_flag("--json", f.json, "Print one JSON object instead of the report");
  cmd.add_option("-o,--output", f.output_plan, "Write the plan file (YAML) here");
  AddEnumOption(cmd, "--emit", f.emit, kExportTargetNames,
                "Print the plan for another stack: " + Choices(kExportTargetNames));
}

Result<DeviceSpec> ToDevice(const PlanFlags& f) {
  if (f.gpu) return FindGpu(*f.gpu);
  if (f.gpu_mem) {
    auto bytes = ParseBytes(*f.gpu_mem);
    if (!bytes) return MakeError("--gpu-mem: " + bytes.error().message);
    DeviceSpec gpu = CustomGpu(*bytes);
    if (gpu.memory_bytes <= gpu.ContextBytes())
      return MakeError(
          fmt::format("--gpu-mem {} leaves nothing for training: the CUDA context "
                      "alone takes {}",
                      *f.gpu_mem, FormatBytes(gpu.ContextBytes())));
    return gpu;
  }
  if (f.device == "cpu") return CpuDevice(HostMemoryBytes());
  if (f.device)
    return MakeError(fmt::format(
        "--device '{}' is not supported here; use --device cpu or --gpu NAME", *f.device));
  return MakeError(
      "say which device to plan for: --gpu NAME (see `headroom gpus`), --gpu-mem 24GiB or "
      "--device cpu");
}

std::optional<Error> ApplyFineTune(const PlanFlags& f, const ModelSpec& model, TrainingConfig& c) {
  if (f.qlora || f.lora_rank || !f.lora_targets.empty()) {
    c.fine_tune.mode = f.qlora ? FineTuneMode::kQLora : FineTuneMode::kLora;
    c.fine_tune.lora_rank = f.lora_rank.value_or(16);
    c.fine_tune.lora_alpha =
        f.lora_alpha.value_or(2.0 * static_cast<double>(c.fine_tune.lora_rank));
    c.fine_tune.lora_dropout = f.lora_dropout.value_or(0.0);
    c.fine_tune.lora_targets =
        f.lora_targets.empty() ? DefaultLoraTargets(model.family) : f.lora_targets;
  } else if (f.lora_alpha || f.lora_dropout) {
    return Error{fmt::format("{} applies to LoRA and QLoRA; give --lora-rank or --qlora",
                             f.lora_alpha ? "--lora-alpha" : "--lora-dropout")};
  }
  if (f.base_dtype && c.fine_tune.mode == FineTuneMode::kFull)
    return Error{"--base-dtype applies to LoRA and QLoRA (the frozen base); give --lora-rank"};
  c.base_dtype = f.base_dtype;
  return std::nullopt;
}

// Flags that conflict, or that the chosen mode would ignore, are errors.
std::optional<Error> CheckModeFlags(const PlanFlags& f, bool solving) {
  if (f.json && f.emit) return Error{"--json and --emit both choose the output; give one"};
  const char* solver_only = f.global_batch      ? "--global-batch"
                            : f.solve_precision ? "--precision auto"
                                                : nullptr;
  if (!solving && solver_only) {
    return Error{fmt::format(
        "{} applies when the solver chooses the plan (--auto, or without --micro-batch); a "
        "fixed --micro-batch is predicted as given",
        solver_only)};
  }
  if (solving && f.global_batch && f.grad_accum &&
      (!f.micro_batch || *f.micro_batch * *f.grad_accum != *f.global_batch)) {
    return Error{fmt::format(
        "--grad-accum {} with --global-batch {}: the solver derives the accumulation from the "
        "global batch; give one of them",
        *f.grad_accum, *f.global_batch)};
  }
  return std::nullopt;
}

}  // namespace

void AddSolverChoiceFlags(CLI::App& cmd, PlanFlags& f, const std::string& auto_help) {
  cmd.add_flag("--auto", f.auto_plan, auto_help);
  AddIntegerOption(cmd, "--global-batch", f.global_batch, 1, limits::kMaxBatch,
                   fmt::format("Sequences per optimizer step the solver keeps exact (default: "
                               "micro-batch x grad-accum, or {})",
                               SearchOptions{}.global_batch));
  AddRealOption(cmd, "--margin", f.margin, 0.0, 0.5,
                fmt::format("Fraction of device memory a plan must leave free to fit, in "
                            "[0, 0.5]: the one rule for a stated plan and the solver's "
                            "(default {})",
                            kDefaultMargin));
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

namespace {

// One line on stderr whatever the message holds: a newline or an escape sequence in a
// name is printed escaped, so the reason after it is not lost or overwritten.
void PrintError(std::string message) {
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  fmt::print(stderr, "headroom: error: {}\n", TerminalEscaped(message));
}

}  // namespace

int ReportUsageError(const std::string& message) {
  PrintError(message);
  return kUsageError;
}

std::optional<Error> CheckOutputFlags(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& outputs) {
  for (const auto& [flag, path] : outputs) {
    if (!path) continue;
    if (path->empty()) return MakeError(flag + ": the path is empty; name a file, or - for stdout");
    if (auto error = CheckWritableTarget(*path)) return MakeError(flag + ": " + error->message);
  }
  return std::nullopt;
}

int ReportRunFailure(const std::string& message) {
  PrintError(message);
  return kRunFailure;
}

void PrintReport(const std::string& text) { std::cout << TerminalEscaped(text, true); }

void AddPlanFlags(CLI::App& cmd, PlanFlags& f) {
  AddRequestFlags(cmd, f);
  AddSolverFlags(cmd, f);
}

void AddRequestFlags(CLI::App& cmd, PlanFlags& f) {
  cmd.add_option("--model", f.model,
                 "Built-in model name, a YAML spec, a Hugging Face config.json or hub id ORG/NAME")
      ->required();
  cmd.add_flag("--trust-remote-code", f.trust_remote_code,
               "Import a model_type transformers does not ship from the Python code its "
               "config.json's auto_map names, beside the config (run on fake tensors only)");
  auto* gpu = cmd.add_option("--gpu", f.gpu, "GPU from the catalog (see `headroom gpus`)");
  auto* mem = cmd.add_option("--gpu-mem", f.gpu_mem, "Custom GPU memory budget, e.g. 24GiB");
  auto* device = cmd.add_option("--device", f.device, "Plan for 'cpu' instead of a GPU");
  gpu->excludes(mem)->excludes(device);
  mem->excludes(device);
  AddIntegerOption(cmd, "--seq-len", f.seq_len, 1, limits::kMaxPositions,
                   "Sequence length in tokens (default 512)");
  AddIntegerOption(
      cmd, "--micro-batch", f.micro_batch, 1, limits::kMaxBatch,
      "Sequences per forward/backward pass (plan: omit it and the solver chooses; train: "
      "default 1)");
  AddIntegerOption(cmd, "--grad-accum", f.grad_accum, 1, limits::kMaxBatch,
                   "Micro-batches accumulated per optimizer step (default 1)");
  AddPrecisionFlag(cmd, f);
  AddEnumOption(cmd, "--optimizer", f.optimizer, kOptimizerNames,
                Choices(kOptimizerNames) + " (default: adamw)");
  AddLoraFlags(cmd, f);
  cmd.add_option("--checkpoint", f.checkpoint,
                 "Checkpointed blocks: none | all | every:N | layers:0,2,5-7 (default: none, or "
                 "the solver's choice)");
  AddEnumOption(cmd, "--attention", f.attention, kAttentionNames,
                Choices(kAttentionNames) + " (default: sdpa)");
  cmd.add_option("--moe-routing", f.moe_routing,
                 "Mixture of experts: the routing assumed, balanced | worst-case | capacity:F "
                 "(default: balanced; memory is the same for every routing under transformers' "
                 "grouped_mm experts)");
  AddIntegerOption(cmd, "--images", f.images, 0, limits::kMaxImagesPerSample,
                   "Images per sample, their tokens counted in --seq-len (an imported "
                   "multimodal Gemma 3 config; default 0: text only)");
  cmd.add_option("--kernels", f.kernels,
                 "Kernel packages the training install has, whose kernels transformers calls "
                 "instead of its reference code: fla (flash-linear-attention's gated delta "
                 "rule; an imported Qwen3-Next or Qwen3.5 on CUDA). Default: none");
  cmd.add_option("--loss", f.loss,
                 "The causal-LM loss: full (the model's own, over whole logits) | chunked[:N] "
                 "(TRL's fused LM head, as SFTTrainer adds it: tiles of 4096 tokens x N "
                 "vocabulary entries, default 32768; the logits are never whole). Default: full");
  cmd.add_flag("--activation-offload", f.activation_offload,
               "transformers' activation_checkpointing_enable(offload=True): each checkpointed "
               "block's input waits in pinned host memory (save_on_cpu) until the block's "
               "backward; reported as host_pinned_bytes");
  AddEnumOption(cmd, "--packing", f.packing, kPackingNames,
                "How samples make a micro-batch: padded (--micro-batch rows of --seq-len) | "
                "padding-free (transformers' DataCollatorWithFlattening: one row of "
                "--tokens-per-micro-batch tokens, position_ids restarting per sample). Default: "
                "padded");
  AddIntegerOption(cmd, "--tokens-per-micro-batch", f.tokens_per_micro_batch, 1,
                   limits::kMaxPositions,
                   "With --packing padding-free: the tokens of the packed samples in one row "
                   "(the plan's sequence)");
  AddStackFlags(cmd, f);
  AddParallelFlags(cmd, f);
}

// The ranks and their scheme as given; with --gpus auto (or N without --sharding) one
// rank, the solver setting the rest, after checking what it may pick.
Result<Parallelism> ToParallelism(const PlanFlags& f, Stack stack) {
  const bool choose_sharding = f.gpus > 1 && !f.sharding;
  if (choose_sharding && f.micro_batch && !f.auto_plan)
    return MakeError(fmt::format(
        "--gpus {} with a stated --micro-batch needs --sharding ddp | zero1 | zero2 | zero3 | "
        "fsdp | fsdp-no-reshard (or --auto, and the solver chooses)",
        f.gpus));
  Parallelism p = {.gpus = choose_sharding ? 1 : f.gpus,
                   .nodes = choose_sharding ? 1 : f.nodes.value_or(DefaultNodes(f.gpus)),
                   // --gpus auto, or N without --sharding: the solver sets them.
                   .sharding = f.gpus_auto ? Sharding::kNone : f.sharding.value_or(Sharding::kNone),
                   .ddp_bucket_view = f.ddp_bucket_view,
                   .rank = f.rank,
                   .offload = f.offload,
                   .deepspeed = f.deepspeed,
                   .fsdp_wrap = f.fsdp_wrap.value_or(
                       stack == Stack::kHfTrainer || f.emit == ExportTarget::kAccelerateFsdp ||
                               f.emit == ExportTarget::kHuggingFace
                           ? FsdpWrap::kAccelerate
                           : FsdpWrap::kBlocks),
                   .fsdp_param_dtype = f.fsdp_param_dtype,
                   .fsdp_reduce_dtype = f.fsdp_reduce_dtype};
  if (f.gpus_auto && f.nodes)
    return MakeError(fmt::format(
        "--nodes applies to a stated --gpus N; --gpus auto fills nodes of {}", kGpusPerNode));
  Parallelism checked = p;
  if (f.gpus_auto || choose_sharding) {
    // The solver picks the count (and the scheme unless given); check what it may pick.
    if (f.offload != Offload::kNone && !f.sharding)
      return MakeError(
          fmt::format("--offload {} with --gpus {} needs --sharding: only some "
                      "schemes offload",
                      OffloadName(f.offload), f.gpus_auto ? "auto" : "N"));
    checked.gpus = std::max<int64_t>(2, f.gpus);
    checked.nodes = 1;
    checked.sharding = f.sharding.value_or(Sharding::kFsdp);  // the policy's scheme
  }
  if (auto error = ValidateParallelism(checked)) return *error;
  if (f.gpus_auto || choose_sharding) p.offload = Offload::kNone;  // the solver's
  return p;
}

namespace {
// Padded rows of --seq-len, or one padding-free row of --tokens-per-micro-batch tokens.
std::optional<Error> ApplyPacking(const PlanFlags& f, TrainingConfig& c) {
  c.packing = f.packing;
  c.seq_len = f.seq_len;
  if (f.packing == Packing::kPadded) {
    if (f.tokens_per_micro_batch)
      return MakeError("--tokens-per-micro-batch applies to --packing padding-free");
    return std::nullopt;
  }
  if (!f.tokens_per_micro_batch)
    return MakeError(
        "--packing padding-free needs --tokens-per-micro-batch T: the tokens packed in a row");
  c.seq_len = *f.tokens_per_micro_batch;
  return std::nullopt;
}

// What only some models take: the experts' routing, images per sample, kernel packages;
// and the loss.
std::optional<Error> ApplyModelInputs(const PlanFlags& f, const ModelSpec& model,
                                      TrainingConfig& c) {
  if (model.is_moe()) {
    auto routing = ParseMoeRouting(f.moe_routing.value_or("balanced"));
    if (!routing) return routing.error();
    c.moe_routing = *routing;
  } else if (f.moe_routing) {
    return MakeError(fmt::format("--moe-routing: {} is not a mixture of experts", model.name));
  }
  if (f.images > 0 && model.family != ModelFamily::kImported) {
    return MakeError(fmt::format(
        "--images: {} is planned by a built graph, which has no vision tower; images are "
        "planned for a multimodal Gemma 3 config.json (model_type 'gemma3'), imported",
        model.name));
  }
  c.images_per_sample = f.images;
  Result<std::vector<std::string>> kernels = ParseKernelPackages(f.kernels);
  if (!kernels) return kernels.error();
  if (!kernels->empty() && model.family != ModelFamily::kImported) {
    return MakeError(fmt::format(
        "--kernels {}: {} is planned by a built graph, whose ops are headroom's own; kernel "
        "packages are planned for a model imported from its transformers code",
        fmt::join(*kernels, ","), model.name));
  }
  c.kernel_packages = std::move(*kernels);
  auto loss = LossConfig::Parse(f.loss);
  if (!loss) return loss.error();
  c.loss = *loss;
  // FSDP checkpoints through accelerate's own wrapper, which keeps activations on the device.
  const bool may_shard_fsdp =
      f.gpus_auto || (f.gpus > 1 && (!f.sharding || *f.sharding == Sharding::kFsdp ||
                                     *f.sharding == Sharding::kFsdpNoReshard));
  if (c.activation_offload && (f.emit == ExportTarget::kAccelerateFsdp ||
                               (f.emit == ExportTarget::kHuggingFace && may_shard_fsdp))) {
    return MakeError(
        "--activation-offload is transformers' checkpoint wrapper; FSDP checkpoints through "
        "accelerate's, which does not offload: with --emit hf name --sharding zero1, zero2, "
        "zero3 or ddp");
  }
  // HF Trainer computes the model's own loss; the other exports configure an engine or a
  // launch, and the loss is the user's script's.
  if (f.emit == ExportTarget::kHuggingFace && c.loss.chunked()) {
    return MakeError(
        "--emit hf writes a stack that computes the model's own loss; --loss chunked is TRL's "
        "fused LM head, which SFTTrainer adds (plan it without --emit hf)");
  }
  return std::nullopt;
}
}  // namespace

Result<PlanRequest> ToPlanRequest(const PlanFlags& f) {
  PlanRequest r;
  auto model = ResolveModel(f.model, {.trust_remote_code = f.trust_remote_code});
  if (!model) return model.error();
  r.model = *model;
  auto device = ToDevice(f);
  if (!device) return device.error();
  r.device = *device;

  TrainingConfig& c = r.config;
  if (auto error = ApplyPacking(f, c)) return *error;
  c.micro_batch = f.micro_batch.value_or(1);
  c.grad_accum_steps = f.grad_accum.value_or(1);
  c.precision =
      f.precision.value_or(r.device.supports_bf16() ? Precision::kAmpBf16 : Precision::kAmpFp16);
  c.optimizer = f.optimizer;
  if (auto error = ApplyFineTune(f, r.model, c)) return *error;
  c.stack = f.stack.value_or(Stack::kPytorch);
  c.activation_offload = f.activation_offload;
  c.optimizer_impl = f.optimizer_impl;
  if (f.cpu_bf16 && r.device.is_cuda) return MakeError("--cpu-bf16 applies to --device cpu");
  if (f.cpu_threads && r.device.is_cuda) return MakeError("--cpu-threads applies to --device cpu");
  c.kernels = {.cuda = r.device.is_cuda,
               .cpu_bf16 = f.cpu_bf16.value_or(HostCpuBf16()),
               .cpu_threads = f.cpu_threads.value_or(HostCpuThreads()),
               .compute_capability = r.device.is_cuda ? r.device.compute_capability : 0};
  if (!r.device.is_cuda && !f.cpu_bf16 && c.precision != Precision::kFp32) {
    if (const auto kernel = UnmeasuredHostBf16Kernel()) {
      return MakeError(fmt::format(
          "this CPU runs 16-bit matmuls in {}, whose scratch no rule has measured: measure it "
          "with `python3 tests/reference/onednn_scratch_probe.py`, or plan for a measured "
          "kernel with --cpu-bf16 amx|avx512-bf16|emulated|aten",
          *kernel));
    }
  }
  auto parallel = ToParallelism(f, c.stack);
  if (!parallel) return parallel.error();
  c.parallel = *parallel;
  if (f.sharding) {            // also when the solver takes the count: it must not search a scheme
    TrainingConfig asked = c;  // that is not replayed
    asked.parallel.sharding = *f.sharding;
    if (auto error = UnmodelledScheme(asked)) return *error;
  }
  auto ckpt = CheckpointPolicy::Parse(f.checkpoint.value_or("none"));
  if (!ckpt) return ckpt.error();
  c.checkpoint = *ckpt;
  c.attention = AttentionAsExecuted(r.model, f.attention, r.device);
  if (auto error = ApplyModelInputs(f, r.model, c)) return *error;
  return r;
}

Result<std::optional<SearchOptions>> ToSearchOptions(const PlanFlags& f, const PlanRequest& r) {
  const bool solving =
      f.auto_plan || !f.micro_batch || f.emit || f.gpus_auto || (f.gpus > 1 && !f.sharding);
  if (auto error = CheckModeFlags(f, solving)) return *error;
  if (!solving) return std::optional<SearchOptions>();
  SearchOptions o;
  o.num_gpus = static_cast<int>(r.config.parallel.gpus);
  if (f.gpus_auto) {
    o.gpu_count = GpuCountOptions{.max_gpus = f.max_gpus, .offload = f.offload};
    if (f.sharding) o.gpu_count->schemes = {*f.sharding};
  } else if (f.gpus > 1 && !f.sharding) {
    o.gpu_count = GpuCountOptions{.max_gpus = f.gpus,
                                  .only_count = f.gpus,
                                  .only_count_nodes = f.nodes.value_or(DefaultNodes(f.gpus)),
                                  .offload = f.offload};
  }
  if (f.global_batch) {
    o.global_batch = *f.global_batch;
    o.exact_global_batch = true;
    if (!f.gpus_auto && o.global_batch % f.gpus != 0) {
      const int64_t below = o.global_batch / f.gpus * f.gpus;
      return MakeError(fmt::format(
          "--global-batch {} cannot be split evenly over --gpus {}: the nearest that can are "
          "{}{}; the global batch is kept exact",
          o.global_batch, f.gpus, below > 0 ? fmt::format("{} and ", below) : "", below + f.gpus));
    }
  } else if (f.micro_batch || f.grad_accum) {
    o.global_batch = f.micro_batch.value_or(1) * f.grad_accum.value_or(1) * f.gpus;
    if (auto error = limits::CheckRange(o.global_batch, 1, limits::kMaxBatch,
                                        "--micro-batch x --grad-accum (the global batch)"))
      return *error;
  }  // else SearchOptions' default
  o.margin = f.margin.value_or(kDefaultMargin);
  if (f.solve_precision) o.precisions = SupportedPrecisions(r.device);
  if (f.checkpoint) {
    o.fixed_checkpoint = r.config.checkpoint;
  } else if (r.config.images_per_sample > 0) {
    // Checkpointing would checkpoint the vision tower's layers too, which no import
    // records (image_inputs.py): the search keeps every block as it is.
    o.fixed_checkpoint = CheckpointPolicy{};
  }
  // A padding-free micro-batch is one row; the solver searches the rest.
  o.fixed_micro_batch =
      r.config.packing == Packing::kPaddingFree ? std::optional<int64_t>(1) : f.micro_batch;
  if (o.fixed_micro_batch && o.global_batch % *o.fixed_micro_batch != 0) {
    return MakeError(fmt::format(
        "--micro-batch {} does not divide --global-batch {}; the global batch is kept exact",
        *o.fixed_micro_batch, o.global_batch));
  }
  if (f.emit) {
    const std::string note =
        NarrowToExportable(*f.emit, f.sharding, r.config.precision, r.device.supports_bf16(), o);
    if (!note.empty()) fmt::print(stderr, "headroom: note: {}\n", note);
  }
  return std::optional<SearchOptions>(o);
}

}  // namespace headroom
