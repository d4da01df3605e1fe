#include "cli/plan_flags.h"

#include <fmt/format.h>

#include "models/catalog.h"
#include "planner/core/byte_units.h"
#include "planner/core/gpu_catalog.h"

namespace headroom {

int ReportUsageError(const std::string& message) {
  fmt::print(stderr, "headroom: error: {}\n", message);
  return kUsageError;
}

void AddPlanFlags(CLI::App& cmd, PlanFlags& f) {
  cmd.add_option("--model", f.model,
                 "Built-in model name, a YAML spec, or a Hugging Face config.json")
      ->required();
  auto* gpu = cmd.add_option("--gpu", f.gpu, "GPU from the catalog (see `headroom gpus`)");
  auto* mem = cmd.add_option("--gpu-mem", f.gpu_mem, "Custom GPU memory budget, e.g. 24GiB");
  auto* device = cmd.add_option("--device", f.device, "Plan for 'cpu' instead of a GPU");
  gpu->excludes(mem)->excludes(device);
  mem->excludes(device);
  cmd.add_option("--seq-len", f.seq_len, "Sequence length in tokens")->capture_default_str();
  cmd.add_option("--micro-batch", f.micro_batch,
                 "Sequences per forward/backward pass (omit it and the solver chooses)");
  cmd.add_option("--grad-accum", f.grad_accum, "Micro-batches accumulated per optimizer step")
      ->capture_default_str();
  cmd.add_option("--precision", f.precision,
                 "fp32 | amp-bf16 | amp-fp16 | bf16 | mixed-bf16 | mixed-fp16 | auto (the solver "
                 "picks; default "
                 "amp-bf16, amp-fp16 without bf16)");
  cmd.add_option("--optimizer", f.optimizer, "adamw | sgd | sgd-momentum | adafactor | adamw-8bit")
      ->capture_default_str();
  auto* rank =
      cmd.add_option("--lora-rank", f.lora_rank, "Train LoRA adapters of this rank (frozen base)");
  cmd.add_option("--lora-alpha", f.lora_alpha, "LoRA alpha (default 2 x rank)");
  cmd.add_option("--lora-dropout", f.lora_dropout, "Dropout on the LoRA input (default 0)");
  cmd.add_option("--lora-targets", f.lora_targets,
                 "Linear layers with adapters, e.g. q,v or q_proj,v_proj")
      ->delimiter(',');
  cmd.add_flag(
      "--qlora", f.qlora,
      "QLoRA: 4-bit NF4 base weights with LoRA adapters (rank from --lora-rank, default 16)");
  (void)rank;
  cmd.add_option("--checkpoint", f.checkpoint,
                 "Checkpointed blocks: none | all | every:N | layers:0,2,5-7 (default: none, or "
                 "the solver's choice)");
  cmd.add_option("--attention", f.attention, "eager | sdpa")->capture_default_str();
  cmd.add_option("--stack", f.stack,
                 "The training code that runs the plan: pytorch (a plain loop) | hf-trainer | "
                 "headroom (`headroom train`); sets the defaults below (default: pytorch)")
      ->check(CLI::IsMember({"pytorch", "hf-trainer", "headroom"}));
  cmd.add_option("--optimizer-impl", f.optimizer_impl,
                 "for-loop | foreach | fused (default: the stack's; torch.optim uses foreach on "
                 "CUDA and a loop on the CPU, HF Trainer fused)")
      ->check(CLI::IsMember({"for-loop", "foreach", "fused"}));
  cmd.add_option("--base-dtype", f.base_dtype,
                 "LoRA/QLoRA: the dtype the frozen base model is loaded in: fp32 | bf16 | fp16 "
                 "(default: the 16-bit compute dtype under AMP, else the precision's)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd.add_option("--cpu-bf16", f.cpu_bf16,
                 "With --device cpu, how its bf16 matmuls run: amx (= native) | avx512-bf16 | "
                 "emulated (default: this machine's CPU)")
      ->check(CLI::IsMember({"native", "amx", "avx512-bf16", "emulated"}));
  cmd.add_flag("--json", f.json, "Print one JSON object instead of the report");
  cmd.add_flag("--auto", f.auto_plan,
               "Solve for the fastest plan that fits (implied when --micro-batch is not given)");
  cmd.add_option("--global-batch", f.global_batch,
                 fmt::format("Sequences per optimizer step the solver keeps exact (default: "
                             "micro-batch x grad-accum, or {})",
                             SearchOptions{}.global_batch));
  cmd.add_option("--margin", f.margin, "Fraction of device memory the solver leaves free")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.5));
  cmd.add_option("-o,--output", f.output_plan, "Write the plan file (YAML) here");
  cmd.add_option("--emit", f.emit, "Print the plan for another stack: hf | deepspeed")
      ->check(CLI::IsMember({"hf", "deepspeed"}));
}

void NoteGivenFlags(const CLI::App& cmd, PlanFlags& f) {
  f.micro_batch_given = cmd.count("--micro-batch") > 0;
  f.checkpoint_given = cmd.count("--checkpoint") > 0;
  f.grad_accum_given = cmd.count("--grad-accum") > 0;
}

Result<PlanRequest> ToPlanRequest(const PlanFlags& f) {
  PlanRequest r;
  auto model = ResolveModel(f.model);
  if (!model) return model.error();
  r.model = *model;

  if (!f.gpu.empty()) {
    auto gpu = FindGpu(f.gpu);
    if (!gpu) return gpu.error();
    r.device = *gpu;
  } else if (!f.gpu_mem.empty()) {
    auto bytes = ParseBytes(f.gpu_mem);
    if (!bytes) return MakeError("--gpu-mem: " + bytes.error().message);
    r.device = CustomGpu(*bytes);
  } else if (f.device == "cpu") {
    r.device = CpuDevice(HostMemoryBytes());
  } else if (!f.device.empty()) {
    return MakeError(fmt::format(
        "--device '{}' is not supported here; use --device cpu or --gpu NAME", f.device));
  } else {
    return MakeError(
        "say which device to plan for: --gpu NAME (see `headroom gpus`), --gpu-mem 24GiB or "
        "--device cpu");
  }

  TrainingConfig& c = r.config;
  c.seq_len = f.seq_len;
  c.micro_batch = f.micro_batch;
  c.grad_accum_steps = f.grad_accum;
  if (f.precision.empty() || f.precision == "auto") {
    c.precision = r.device.supports_bf16() ? Precision::kAmpBf16 : Precision::kAmpFp16;
  } else {
    auto p = ParsePrecision(f.precision);
    if (!p) return p.error();
    c.precision = *p;
  }
  auto opt = ParseOptimizer(f.optimizer);
  if (!opt) return opt.error();
  c.optimizer = *opt;

  if (f.qlora || f.lora_rank != 0 || !f.lora_targets.empty()) {
    c.fine_tune.mode = f.qlora ? FineTuneMode::kQLora : FineTuneMode::kLora;
    c.fine_tune.lora_rank = f.lora_rank != 0 ? f.lora_rank : 16;
    c.fine_tune.lora_alpha =
        f.lora_alpha > 0 ? f.lora_alpha : 2.0 * static_cast<double>(c.fine_tune.lora_rank);
    c.fine_tune.lora_dropout = f.lora_dropout;
    c.fine_tune.lora_targets =
        f.lora_targets.empty() ? DefaultLoraTargets(r.model.family) : f.lora_targets;
  }
  c.stack = *ParseStack(f.stack.empty() ? "pytorch" : f.stack);
  if (!f.optimizer_impl.empty()) c.optimizer_impl = *ParseOptimizerImpl(f.optimizer_impl);
  if (!f.base_dtype.empty()) {
    if (c.fine_tune.mode == FineTuneMode::kFull)
      return MakeError(
          "--base-dtype applies to LoRA and QLoRA (the frozen base); give --lora-rank");
    c.base_dtype = ParseDType(f.base_dtype);
  }
  if (!f.cpu_bf16.empty() && r.device.is_cuda)
    return MakeError("--cpu-bf16 applies to --device cpu");
  c.kernels = {.cuda = r.device.is_cuda,
               .cpu_bf16 = f.cpu_bf16.empty() ? HostCpuBf16() : *ParseCpuBf16(f.cpu_bf16)};
  auto ckpt = CheckpointPolicy::Parse(f.checkpoint);
  if (!ckpt) return ckpt.error();
  c.checkpoint = *ckpt;
  if (f.attention == "sdpa") {
    c.attention = AttentionAsExecuted(r.model, AttentionImpl::kSdpa, r.device);
  } else if (f.attention == "eager") {
    c.attention = AttentionImpl::kEager;
  } else {
    return MakeError(fmt::format("--attention '{}' is not known; use eager or sdpa", f.attention));
  }
  return r;
}

}  // namespace headroom
