#include "planner/report/stack_exports.h"

#include <algorithm>

#include <fmt/format.h>

namespace headroom {
namespace {

const char* HfOptimizer(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kAdamW:
      return "adamw_torch";
    case OptimizerKind::kSgd:
    case OptimizerKind::kSgdMomentum:
      return "sgd";
    case OptimizerKind::kAdafactor:
      return "adafactor";
    case OptimizerKind::kAdamW8bit:
      return "adamw_bnb_8bit";
  }
  return "adamw_torch";
}

bool IsBf16(Precision p) {
  return p == Precision::kAmpBf16 || p == Precision::kBf16 || p == Precision::kMixedBf16;
}
bool IsFp16(Precision p) { return p == Precision::kAmpFp16 || p == Precision::kMixedFp16; }

}  // namespace

std::vector<Precision> ExportPrecisions(ExportTarget target) {
  switch (target) {
    case ExportTarget::kHuggingFace:
      return {Precision::kFp32, Precision::kAmpBf16, Precision::kAmpFp16};
    case ExportTarget::kDeepSpeed:
      return {Precision::kFp32, Precision::kMixedBf16, Precision::kMixedFp16};
    case ExportTarget::kAccelerateFsdp:
      // mixed_precision 'no' (fp32, or a model loaded in bf16), or 'bf16': accelerate's
      // MixedPrecisionPolicy over fp32 shards, without autocast (FsdpPolicyOf).
      return {Precision::kFp32, Precision::kAmpBf16, Precision::kBf16};
    case ExportTarget::kTorchrun:
      break;  // the user's script: any regime
  }
  return {Precision::kFp32, Precision::kAmpBf16,   Precision::kAmpFp16,
          Precision::kBf16, Precision::kMixedBf16, Precision::kMixedFp16};
}

std::vector<Precision> ExportablePrecisions(ExportTarget target,
                                            const std::vector<Precision>& wanted,
                                            bool bf16_supported) {
  const std::vector<Precision> allowed = ExportPrecisions(target);
  std::vector<Precision> out;
  for (Precision p : wanted) {
    if (std::find(allowed.begin(), allowed.end(), p) != allowed.end()) out.push_back(p);
  }
  if (out.empty()) {
    for (Precision p : allowed) {
      if (p != Precision::kFp32 && IsBf16(p) == bf16_supported) out.push_back(p);
    }
  }
  return out;
}

bool HfRunsDeepSpeed(Sharding sharding) {
  return sharding == Sharding::kZero1 || sharding == Sharding::kZero2 ||
         sharding == Sharding::kZero3;
}

nlohmann::json HfTrainingArguments(const TrainingConfig& c, bool checkpoint_all,
                                   int64_t global_batch) {
  nlohmann::json j = {
      {"per_device_train_batch_size", c.micro_batch},
      {"gradient_accumulation_steps", c.grad_accum_steps},
      {"gradient_checkpointing", checkpoint_all},
      {"bf16", IsBf16(c.precision)},
      {"fp16", IsFp16(c.precision)},
      {"optim", HfOptimizer(c.optimizer)},
  };
  if (c.optimizer == OptimizerKind::kSgdMomentum) j["optim_args"] = "momentum=0.9";
  // Trainer pops `offload` from these kwargs into activation_checkpointing_enable
  // (trainer.py); gradient_checkpointing above is their flag's deprecated alias.
  if (c.activation_offload && checkpoint_all)
    j["activation_checkpointing_kwargs"] = {{"offload", true}};
  if (c.parallel.fsdp()) {
    // FSDP2 through accelerate; checkpointing through FSDP's own wrapper, as HF asks
    // (gradient_checkpointing with FSDP is refused in favour of activation_checkpointing).
    j["fsdp"] = std::string(c.parallel.sharding == Sharding::kFsdp ? "full_shard auto_wrap"
                                                                   : "shard_grad_op auto_wrap") +
                (c.parallel.offload == Offload::kOptimizerAndParams ? " offload" : "");
    j["fsdp_config"] = {{"version", 2},
                        {"reshard_after_forward", c.parallel.sharding == Sharding::kFsdp},
                        {"activation_checkpointing", checkpoint_all}};
    j["gradient_checkpointing"] = false;
  } else if (HfRunsDeepSpeed(c.parallel.sharding)) {
    j["deepspeed"] = DeepSpeedConfig(
        c, global_batch > 0 ? global_batch : c.micro_batch * c.grad_accum_steps * c.parallel.gpus);
    j["deepspeed"]["train_batch_size"] = "auto";
    j["deepspeed"]["train_micro_batch_size_per_gpu"] = "auto";
    j["deepspeed"]["gradient_accumulation_steps"] = "auto";
  }
  return j;
}

int DeepSpeedStage(Sharding sharding) {
  switch (sharding) {
    case Sharding::kNone:
    case Sharding::kDdp:
      return 0;
    case Sharding::kZero1:
      return 1;
    case Sharding::kZero2:
    case Sharding::kFsdpNoReshard:  // the nearest: gradients and states sharded
      return 2;
    case Sharding::kZero3:
    case Sharding::kFsdp:
      return 3;
  }
  return 0;
}

std::string AccelerateFsdpConfig(const TrainingConfig& c, bool checkpoint_all) {
  const Parallelism& p = c.parallel;
  std::string out;
  if (c.fine_tune.mode == FineTuneMode::kQLora) {
    // FSDP shards bitsandbytes' 4-bit weights only when stored as bf16; the plan assumes it.
    out +=
        "# QLoRA: load the base with transformers.BitsAndBytesConfig(load_in_4bit=True,\n"
        "#   bnb_4bit_quant_type='nf4', bnb_4bit_use_double_quant=True,\n"
        "#   bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_quant_storage=torch.bfloat16)\n";
  }
  out += "compute_environment: LOCAL_MACHINE\n";
  out += "distributed_type: FSDP\n";
  out += "fsdp_config:\n";
  out += "  fsdp_version: 2\n";
  out += "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n";
  out += fmt::format("  fsdp_reshard_after_forward: {}\n", p.sharding == Sharding::kFsdp);
  out += fmt::format("  fsdp_activation_checkpointing: {}\n", checkpoint_all);
  // CPUOffloadPolicy: shards, gradients and the optimizer step in CPU RAM.
  out += fmt::format("  fsdp_offload_params: {}\n", p.offload == Offload::kOptimizerAndParams);
  out += "  fsdp_cpu_ram_efficient_loading: false\n";
  out += "  fsdp_state_dict_type: SHARDED_STATE_DICT\n";
  // amp-bf16: accelerate's bf16 policy; bf16: 'no', the model loaded in bf16.
  out += c.precision == Precision::kAmpBf16 ? "mixed_precision: bf16\n" : "mixed_precision: 'no'\n";
  out += fmt::format("num_machines: {}\n", p.nodes);
  out += fmt::format("num_processes: {}\n", p.gpus);
  out += "machine_rank: 0\n";
  out += "main_training_function: main\n";
  out += fmt::format("use_cpu: {}\n", !c.kernels.cuda);
  return out;
}

std::string TorchrunCommand(const Parallelism& p, const std::string& script) {
  if (p.nodes <= 1)
    return fmt::format("torchrun --standalone --nnodes 1 --nproc-per-node {} {}", p.gpus, script);
  return fmt::format(
      "torchrun --nnodes {} --nproc-per-node {} --node-rank $NODE_RANK --rdzv-backend c10d "
      "--rdzv-endpoint $MASTER_ADDR:29500 {}",
      p.nodes, p.gpus_per_node(), script);
}

nlohmann::json DeepSpeedConfig(const TrainingConfig& c, int64_t global_batch) {
  const Parallelism& p = c.parallel;
  const DeepSpeedZeroKnobs& ds = p.deepspeed;
  const int stage = DeepSpeedStage(p.sharding);
  nlohmann::json j = {
      {"train_batch_size", global_batch},
      {"train_micro_batch_size_per_gpu", c.micro_batch},
      {"gradient_accumulation_steps", c.grad_accum_steps},
      {"bf16", {{"enabled", IsBf16(c.precision)}}},
      // PyTorch GradScaler's defaults: initial scale 2^16, growth interval 2000.
      {"fp16",
       {{"enabled", IsFp16(c.precision)},
        {"loss_scale", 0},
        {"initial_scale_power", 16},
        {"loss_scale_window", 2000},
        {"hysteresis", 1},
        {"min_loss_scale", 1}}},
      {"zero_optimization",
       {{"stage", stage},
        // Counted in elements (deepspeed/runtime/zero/config.py); headroom's prediction
        // sizes the buckets from these.
        {"reduce_bucket_size", ds.reduce_bucket_size},
        {"allgather_bucket_size", ds.allgather_bucket_size},
        {"contiguous_gradients", true},
        {"overlap_comm", p.overlap_comm()},
        {"offload_optimizer",
         {{"device", p.offload == Offload::kNone ? "none" : "cpu"}, {"pin_memory", true}}}}},
      // No "optimizer" section: ZeRO wraps the training script's (HF Trainer's from
      // `optim`) torch optimizer, the one the plan prices; DeepSpeed's own (FusedAdam)
      // is another implementation. Offloading runs DeepSpeedCPUAdam on the CPU.
      {"zero_allow_untested_optimizer", true},
  };
  if (stage == 3) {
    j["zero_optimization"]["stage3_prefetch_bucket_size"] = ds.stage3_prefetch_bucket_size;
    j["zero_optimization"]["stage3_max_live_parameters"] = ds.stage3_max_live_parameters;
    j["zero_optimization"]["stage3_param_persistence_threshold"] =
        ds.stage3_param_persistence_threshold;
    j["zero_optimization"]["offload_param"] = {
        {"device", p.offload == Offload::kOptimizerAndParams ? "cpu" : "none"},
        {"pin_memory", true}};
  }
  if (p.offload != Offload::kNone && c.optimizer == OptimizerKind::kAdamW)
    j["optimizer"] = {{"type", "AdamW"}, {"params", {{"lr", "auto"}, {"weight_decay", "auto"}}}};
  return j;
}

}  // namespace headroom
