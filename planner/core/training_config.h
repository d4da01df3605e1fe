// What the user asks for: micro-batch, accumulation, sequence length, precision regime,
// optimizer, fine-tuning mode, checkpointed blocks and attention implementation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/dtype.h"
#include "planner/core/enum_table.h"
#include "planner/core/parallelism.h"
#include "planner/core/result.h"
#include "planner/core/training_stack.h"

namespace headroom {

enum class Precision {
  kFp32,       // fp32 weights, grads, states, activations
  kAmpBf16,    // fp32 weights + autocast to bf16 (weight-cast cache)
  kAmpFp16,    // fp32 weights + autocast to fp16, dynamic loss scaling
  kBf16,       // pure bf16: weights, grads, optimizer states, activations
  kMixedBf16,  // bf16 weights and grads, fp32 master weights (Megatron / DeepSpeed)
  kMixedFp16,  // fp16 weights and grads, fp32 master weights, dynamic loss scaling
};

// How a precision regime stores and computes; derived from Precision.
struct PrecisionRegime {
  DType param_dtype;            // stored model weights
  DType compute_dtype;          // matmul inputs / outputs
  bool autocast = false;        // PyTorch AMP: casts at op boundaries, fp32 ops list
  bool master_weights = false;  // fp32 copy of trainable weights kept by the optimizer
  bool loss_scaling = false;
  DType optimizer_state_dtype;  // Adam moments etc. (fp32 except pure bf16)
  // Frozen (non-trainable) weights: under AMP they are loaded in the 16-bit compute
  // dtype, as LoRA users load base models (torch_dtype=bfloat16); otherwise param_dtype.
  DType frozen_dtype;
};

inline constexpr EnumName<Precision> kPrecisionNames[] = {{Precision::kFp32, "fp32"},
                                                          {Precision::kAmpBf16, "amp-bf16"},
                                                          {Precision::kAmpFp16, "amp-fp16"},
                                                          {Precision::kBf16, "bf16"},
                                                          {Precision::kMixedBf16, "mixed-bf16"},
                                                          {Precision::kMixedFp16, "mixed-fp16"}};
inline std::string_view PrecisionName(Precision p) { return NameIn(kPrecisionNames, p); }
inline Result<Precision> ParsePrecision(std::string_view name) {
  return ParseIn(kPrecisionNames, name, "precision");
}
PrecisionRegime RegimeOf(Precision p);
// The dtype a trainable LoRA adapter is stored in: fp32 under AMP (PEFT's default
// autocast_adapter_dtype), else the regime's parameter dtype.
DType AdapterDType(const PrecisionRegime& regime);

enum class OptimizerKind { kAdamW, kSgd, kSgdMomentum, kAdafactor, kAdamW8bit };
inline constexpr EnumName<OptimizerKind> kOptimizerNames[] = {
    {OptimizerKind::kAdamW, "adamw"},
    {OptimizerKind::kSgd, "sgd"},
    {OptimizerKind::kSgdMomentum, "sgd-momentum"},
    {OptimizerKind::kAdafactor, "adafactor"},
    {OptimizerKind::kAdamW8bit, "adamw-8bit"}};
inline std::string_view OptimizerName(OptimizerKind k) { return NameIn(kOptimizerNames, k); }
inline Result<OptimizerKind> ParseOptimizer(std::string_view name) {
  return ParseIn(kOptimizerNames, name, "optimizer");
}

enum class FineTuneMode { kFull, kLora, kQLora };
inline constexpr EnumName<FineTuneMode> kFineTuneNames[] = {
    {FineTuneMode::kFull, "full"}, {FineTuneMode::kLora, "lora"}, {FineTuneMode::kQLora, "qlora"}};
inline std::string_view FineTuneName(FineTuneMode m) { return NameIn(kFineTuneNames, m); }

struct FineTuneConfig {
  FineTuneMode mode = FineTuneMode::kFull;
  int64_t lora_rank = 16;
  double lora_alpha = 32.0;
  double lora_dropout = 0.0;
  std::vector<std::string> lora_targets;  // empty: the family's default (q and v)
  bool operator==(const FineTuneConfig&) const = default;
};

// transformers' attn_implementation: "eager", "sdpa" or "flash_attention_2" (flash2).
enum class AttentionImpl { kEager, kSdpa, kFlash2 };
inline constexpr EnumName<AttentionImpl> kAttentionNames[] = {{AttentionImpl::kEager, "eager"},
                                                              {AttentionImpl::kSdpa, "sdpa"},
                                                              {AttentionImpl::kFlash2, "flash2"}};
inline std::string_view AttentionName(AttentionImpl a) { return NameIn(kAttentionNames, a); }
inline Result<AttentionImpl> ParseAttention(std::string_view name) {
  return ParseIn(kAttentionNames, name, "attention");
}

// Which blocks are checkpointed, as written on the command line.
struct CheckpointPolicy {
  enum class Kind { kNone, kAll, kEvery, kLayers };
  Kind kind = Kind::kNone;
  int every = 1;            // kEvery: blocks 0, N, 2N, ...
  std::vector<int> layers;  // kLayers

  // Parses none | all | every:N | layers:0,2,5-7.
  static Result<CheckpointPolicy> Parse(std::string_view text);
  // Per-block flags for a model with `num_blocks` blocks; an index out of range is an error.
  Result<std::vector<bool>> Resolve(int num_blocks) const;
  std::string ToString() const;
  // The policy naming exactly these blocks: none, all, or layers:...
  static CheckpointPolicy Of(const std::vector<bool>& flags);
  bool operator==(const CheckpointPolicy&) const = default;
};

// Mixture of experts: the routing a plan assumes. Balanced spreads the token-expert
// pairs evenly over the experts; worst-case sends every token to the same k experts.
// Under transformers' grouped_mm experts path (and headroom's runtime) the memory is the
// same for both: every experts tensor has one row per pair, and grouped_mm neither
// drops nor pads. A capacity factor (GShard-style dispatch) is parsed and refused: no
// stack headroom plans for has one.
enum class MoeRouting { kBalanced, kWorstCase };
inline constexpr EnumName<MoeRouting> kMoeRoutingNames[] = {{MoeRouting::kBalanced, "balanced"},
                                                            {MoeRouting::kWorstCase, "worst-case"}};
inline std::string_view MoeRoutingName(MoeRouting r) { return NameIn(kMoeRoutingNames, r); }
// balanced | worst-case; capacity:F is checked (F a positive number) and refused with why.
Result<MoeRouting> ParseMoeRouting(std::string_view text);

// Kernel packages a training install has, whose kernels transformers calls where the
// package imports instead of its reference PyTorch code (integrations/hub_kernels.py):
// fla, flash-linear-attention's Triton gated delta rule. An imported graph records them
// from the package's own Python (models/import/kernel_paths.py).
inline constexpr std::string_view kKernelPackages[] = {"fla"};
// The sorted, distinct packages of `names`; an error names an unknown one.
Result<std::vector<std::string>> ParseKernelPackages(std::vector<std::string> names);
// The same from "fla" or "fla,..." (the --kernels flag).
Result<std::vector<std::string>> ParseKernelPackages(std::string_view text);

// The causal-LM loss. kFull: the model's own, transformers' ForCausalLMLoss over the whole
// [b, s, vocab] logits. kChunked: TRL 1.16's fused LM head (trl/trainer/utils.py
// add_fused_lm_head, as SFTTrainer adds it), whose ChunkedLogProbFunction
// (trl/kernels/chunked_logprob.py) projects 4096 tokens by `vocab_tile` vocabulary entries
// at a time and never materializes the logits (planner/simulate/chunked_loss.h).
struct LossConfig {
  enum class Kind { kFull, kChunked };
  Kind kind = Kind::kFull;
  // TRL's _CHUNKED_LOGPROB_CHUNK_SIZE, the vocabulary width of a tile.
  static constexpr int64_t kDefaultVocabTile = 32768;
  int64_t vocab_tile = kDefaultVocabTile;

  bool chunked() const { return kind == Kind::kChunked; }
  // full | chunked | chunked:N (N vocabulary entries per tile, default 32768).
  static Result<LossConfig> Parse(std::string_view text);
  std::string ToString() const;  // what Parse reads back
  bool operator==(const LossConfig&) const = default;
};

// How samples make a micro-batch. kPadded: `micro_batch` rows of `seq_len` tokens.
// kPaddingFree: transformers' DataCollatorWithFlattening (TRL's padding_free): the samples'
// tokens side by side in one row of `seq_len` tokens, with position_ids restarting at each
// sample and labels of their own; the micro-batch is 1.
enum class Packing { kPadded, kPaddingFree };
inline constexpr EnumName<Packing> kPackingNames[] = {{Packing::kPadded, "padded"},
                                                      {Packing::kPaddingFree, "padding-free"}};
inline std::string_view PackingName(Packing p) { return NameIn(kPackingNames, p); }

struct TrainingConfig {
  int64_t micro_batch = 1;
  int64_t grad_accum_steps = 1;
  int64_t seq_len = 512;
  Precision precision = Precision::kAmpBf16;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  FineTuneConfig fine_tune;
  CheckpointPolicy checkpoint;
  AttentionImpl attention = AttentionImpl::kSdpa;
  Stack stack = Stack::kPytorch;
  std::optional<OptimizerImpl> optimizer_impl;  // unset: what the stack picks on the device
  std::optional<DType> base_dtype;  // LoRA: storage of the frozen base; unset: the stack's recipe
  KernelTarget kernels;             // set from the device the plan targets
  std::optional<MoeRouting> moe_routing;  // set for mixture-of-experts models only
  // Images in each sample, their tokens counted in seq_len (an imported vision-language
  // model: models/import/image_inputs.py); 0: text only.
  int64_t images_per_sample = 0;
  std::vector<std::string> kernel_packages;  // kKernelPackages, sorted (an imported graph's)
  LossConfig loss;
  Packing packing = Packing::kPadded;
  // transformers' activation_checkpointing_enable(offload=True): each checkpointed block's
  // input (what the checkpoint saves for its recomputation) goes to pinned host memory
  // under save_on_cpu(pin_memory=True), and comes back for the block's backward.
  bool activation_offload = false;
  Parallelism parallel;  // one rank unless sharded
  bool operator==(const TrainingConfig&) const = default;
};

// FSDP2 through accelerate: HF Trainer's, or accelerate's own wrap (fsdp2_prepare_model).
bool FsdpThroughAccelerate(const TrainingConfig& config);

// The MixedPrecisionPolicy FSDP2 runs with: the one given (--fsdp-param-dtype), else
// accelerate's for mixed_precision "bf16" (HF Trainer's bf16=True, amp-bf16 here):
// MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16, output_dtype=bf16)
// (accelerate 1.15 utils/dataclasses.py FullyShardedDataParallelPlugin.set_mixed_precision,
// called from state.py); accelerate first upcasts trainable parameters to fp32
// (fsdp_utils.py fsdp2_prepare_model). Unset without FSDP or a policy.
struct FsdpPolicy {
  DType param_dtype;
  std::optional<DType> reduce_dtype;  // unset: the parameters' own (torch 2.15)
};
std::optional<FsdpPolicy> FsdpPolicyOf(const TrainingConfig& config);

// The regime as the config runs it. Under an FSDP2 policy the units compute in its
// param_dtype; through accelerate FSDP2 runs without torch.autocast:
// Accelerator._prepare_fsdp2 never reaches prepare_model, where the autocast wrapper is
// added (accelerate 1.15 accelerator.py), and Trainer adds none
// (autocast_smart_context_manager returns nullcontext).
PrecisionRegime RegimeOf(const TrainingConfig& config);

// The optimizer implementation that runs: the one asked for, else the stack's default.
// torch.optim picks foreach on CUDA and a per-parameter loop on the CPU; HF Trainer
// defaults to adamw_torch_fused (torch >= 2.8); LibTorch's optimizers loop per parameter.
OptimizerImpl EffectiveOptimizerImpl(const TrainingConfig& config);
// The storage dtype of frozen (non-trainable, unquantized) weights.
DType FrozenWeightDType(const TrainingConfig& config);
// A sharding scheme the simulator does not replay for this fine-tune (QLoRA's 4-bit base
// under FSDP2 or ZeRO-3): the request is refused, and no search may choose the scheme.
std::optional<Error> UnmodelledScheme(const TrainingConfig& config);
// Python stacks: transformers' decoders build a DynamicCache (use_cache defaults to
// True) unless gradient checkpointing is on or TRL's fused LM head calls the backbone
// (it passes use_cache=False); headroom's runtime keeps none.
bool KeepsKvCache(const TrainingConfig& config);
// Padding-free rows whose attention sees the samples apart: transformers detects packed
// position_ids only without a cache (masking_utils.py _preprocess_mask_arguments: `cache is
// None`), then SDPA and eager attention take a block-diagonal mask it makes. With a
// DynamicCache the samples attend across their boundaries, and no mask is made.
bool MasksPackedSamples(const TrainingConfig& config);

}  // namespace headroom
