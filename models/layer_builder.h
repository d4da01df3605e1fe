// Building blocks shared by the per-family graph builders: linear layers (with LoRA
// adapters and QLoRA quantization as the fine-tuning mode asks), norms, dropout,
// attention and the language-model loss. Each call appends ops to the OpGraph in the
// order PyTorch eager would run them.
#pragma once

#include "models/layer.h"

#include <array>
#include <set>
#include <string>
#include <utility>

#include "models/attention_kernel_choice.h"
#include "models/model_spec.h"
#include "planner/core/training_config.h"
#include "planner/graph/op_graph.h"

namespace headroom {

struct GraphOptions {
  FineTuneConfig fine_tune;
  // Decoders copy K and V into a DynamicCache that attention reads and the model output
  // holds until the forward returns (transformers with use_cache, no checkpointing).
  bool kv_cache = false;
  // The attention implementation and what its call looks like to PyTorch's dispatcher
  // (dtype, device, stack), from which the kernel and its grouped K/V handling follow.
  AttentionCall attention_call;
  // Eager attention's matmul reshapes [b, heads, s, d] views of a projection into
  // [b * heads, s, d]: a copy when b > 1 (the copy is what autograd saves, and the
  // projection output is no longer held). Set from the micro-batch for the Python
  // stacks; headroom's runtime is validated without it.
  bool copy_head_views = false;
  // PEFT's LoRA layer casts its input to the adapters' dtype and the sum back to the
  // base layer's (no-ops when the dtypes agree).
  bool peft_casts = false;
  // transformers' forward returns a ModelOutput holding the last hidden state and the
  // logits (and the pooled output); the caller drops it once it has taken the loss, so
  // they live until the forward returns, beside the loss's fp32 copies.
  bool hold_model_outputs = false;
  // A module's input stays referenced by its caller's variable (and the forward's own
  // argument) until the module returns, after autograd and its other consumers let go of
  // it: transformers runs in Python. headroom's runtime frees each tensor at its last use.
  bool python_references = false;
  // The sequence length the graph is built for; 0: not known. Shapes stay symbolic in s,
  // but whether transformers builds an SDPA sliding-window mask depends on it.
  int64_t seq_len = 0;
  // What an imported graph was recorded under (models/graph_file.h): the built graphs
  // take dtypes from the precision at simulation time and ignore these.
  Precision precision = Precision::kFp32;
  Stack stack = Stack::kPytorch;
  std::optional<DType> base_dtype;
  // A micro-batch of one: transformers runs a slightly different program (a [1, s] slice
  // is contiguous), which an import records separately.
  bool single_sample = false;
  // The CPU kernel that runs the plan's 16-bit matrix products; none on CUDA or in fp32.
  // The built graphs read it from the simulator's target; an imported graph is refused
  // under the oneDNN kernels, whose scratch is modelled per built op kind.
  std::optional<CpuBf16> cpu_bf16_matmul;
  // Images per sample (TrainingConfig::images_per_sample): an imported graph's regime.
  int64_t images_per_sample = 0;
  // Kernel packages transformers calls (TrainingConfig::kernel_packages): an imported
  // graph's regime.
  std::vector<std::string> kernel_packages;
  // The causal-LM loss: the model's own, or TRL's fused LM head (TrainingConfig::loss).
  LossConfig loss;
  // Padding-free rows (TrainingConfig::packing): the loop also passes position_ids and labels
  // of their own; `packed_mask`: SDPA's masks are made from them (MasksPackedSamples).
  bool padding_free = false;
  bool packed_mask = false;
  bool operator==(const GraphOptions&) const = default;
};

// The graph options a training config implies for its stack.
GraphOptions GraphOptionsOf(const TrainingConfig& config);

// [b, s, n]
SymShape TokenShape(int64_t n);
// [b, heads, s, head_dim]
SymShape HeadsShape(int64_t heads, int64_t head_dim);

class LayerBuilder {
 public:
  // `lora_roles`: the linear roles (q, k, v, o, gate, up, down, qkv, ...) that get adapters.
  LayerBuilder(OpGraph& graph, const ModelSpec& spec, const GraphOptions& options,
               std::set<std::string> lora_roles);

  OpGraph& graph() { return graph_; }
  // Python references hold tensors (GraphOptions::python_references).
  bool python_references() const { return options_.python_references; }
  const ModelSpec& spec() const { return spec_; }

  // A parameter outside the LoRA/QLoRA machinery: trainable in full fine-tuning only,
  // or always when `always_trainable` (a classification head PEFT keeps trainable).
  TensorId Param(const std::string& name, SymShape shape, bool always_trainable = false);

  // x [b, s, in] (or [b, in] when `per_sequence`) -> [.., out]. Quantized under QLoRA
  // when `in_block`; adapters added when `role` is a LoRA target.
  TensorId Linear(const std::string& name, const std::string& role, TensorId x, int64_t in,
                  int64_t out, bool bias, bool in_block = true, bool per_sequence = false);
  // The linears added from here on are transformers' Conv1D (GPT-2): weight [in, out].
  void SetConv1dLinears(bool conv1d) { conv1d_linears_ = conv1d; }
  // A linear whose weight already exists (tied LM head).
  TensorId LinearWithWeight(const std::string& name, TensorId x, TensorId weight,
                            SymShape out_shape);

  TensorId Embedding(const std::string& name, TensorId ids, TensorId weight, SymShape out_shape);
  TensorId Dropout(const std::string& name, TensorId x, double p);
  TensorId LayerNorm(const std::string& name, TensorId x, int64_t width);
  TensorId RmsNorm(const std::string& name, TensorId x, int64_t width);
  // Gemma's RMSNorm: (1 + weight) applied in fp32, the result cast back to x's dtype.
  TensorId GemmaRmsNorm(const std::string& name, TensorId x, int64_t width);
  // x * factor (a Python scalar or a 0-dim tensor: nothing saved).
  TensorId Scaled(const std::string& name, TensorId x, double factor);
  TensorId Unary(OpKind kind, const std::string& name, TensorId x);
  // The MLP activation as the model's code runs it (spec.activation).
  TensorId Activation(const std::string& name, TensorId x);
  TensorId Binary(OpKind kind, const std::string& name, TensorId a, TensorId b);
  TensorId View(const std::string& name, TensorId x, SymShape shape);
  // x[..., begin : begin + heads * head_dim] as [b, heads, s, head_dim]: a slice of a
  // fused projection; its backward builds a gradient the size of x (slice_backward).
  TensorId HeadsSlice(const std::string& name, TensorId x, int64_t begin, int64_t heads,
                      int64_t head_dim);
  // cos and sin [1, s, head_dim] in x's dtype, once per forward (`name`.cos/.sin tensors).
  std::array<TensorId, 2> RopeTables(const std::string& op_name, const std::string& name,
                                     TensorId x, const RopeParams& rope);
  // One op producing several views of x (split): its backward builds one gradient of x.
  std::vector<TensorId> SplitView(const std::string& name, TensorId x,
                                  const std::vector<std::string>& parts, SymShape part_shape);

  // Eager attention in a decoder adds a float [b, 1, s, s] mask built once per forward
  // in the hidden states' dtype; SDPA takes is_causal instead. Returns an invalid id
  // for SDPA.
  // `sliding_window` > 0: the sliding-window mask (masking_utils.py's
  // sliding_window_overlay), the same bytes.
  TensorId CausalMaskIfEager(TensorId hidden, int64_t sliding_window = 0);
  // The mask a decoder's attention layers take (`sliding_window` 0: causal ones): eager's
  // additive mask (CausalMaskIfEager); under SDPA, transformers' bool [1, 1, s, s]
  // sliding-window mask once the sequence reaches the window
  // (masking_utils.py create_sliding_window_causal_mask; shorter sequences skip it in
  // _ignore_causal_mask_sdpa and run is_causal), held by the model's forward until it
  // returns (CausalLmHead); otherwise none.
  TensorId DecoderMask(TensorId hidden, int64_t sliding_window);

  // Scaled dot-product attention over heads tensors, returning [b, s, heads * head_dim].
  // `mask` is the causal mask for eager decoders, the bool window mask for SDPA's
  // sliding-window layers (DecoderMask), invalid otherwise.
  // `contiguous_query`: q is a contiguous [b, heads, s, d] tensor, not a transposed view.
  TensorId Attention(const std::string& prefix, TensorId q, TensorId k, TensorId v, TensorId mask,
                     bool causal, bool contiguous_query = false);
  // The attention weights (eager: the probabilities after dropout) the last Attention()
  // returned to Python beside its output; invalid for SDPA, which returns None.
  TensorId last_attention_weights() const { return last_attention_weights_; }

  // logits = x @ lm_weight^T, upcast to fp32, log-softmax, NLL against labels; sets the loss.
  // The loop's batch for a causal LM: input_ids and labels (see layer_builder.cc).
  std::pair<TensorId, TensorId> CausalLmBatch();
  TensorId LanguageModelLoss(TensorId x, TensorId lm_weight, TensorId labels);
  // TRL's fused LM head instead (--loss chunked): one op that never makes the logits.
  TensorId ChunkedLanguageModelLoss(TensorId x, TensorId lm_weight, TensorId labels);
  // Keeps `t` until the forward returns when the stack's model output holds it.
  void HoldAsModelOutput(TensorId t);
  // `input` stays alive until the op that made `module_output` has run (Python stacks):
  // the caller of a module holds its argument through the call.
  void HeldUntilModuleReturns(TensorId input, TensorId module_output);
  // The end of a decoder layer as transformers runs it: the model's loop variable holds
  // the block input, and the layer's `_` the eager attention weights (if any), until the
  // layer returns (modeling_llama.py:297-314, 393-394); then the block ends.
  void EndDecoderLayer(TensorId block_input, TensorId attn_weights, TensorId out);
  // A causal LM's head after its final norm: the model's inputs_embeds (and its SDPA
  // window masks) live until the model returns, the LM head is the embedding (tied) or
  // its own weight, then the loss.
  void CausalLmHead(TensorId normed, TensorId inputs_embeds, TensorId embed, TensorId labels);
  // Classification loss over [b, num_labels] logits.
  TensorId ClassificationLoss(TensorId logits, TensorId labels, int64_t num_labels);

 private:
  TensorId Op(OpKind kind, const std::string& name, std::vector<TensorId> inputs,
              SymShape out_shape, double dropout_p = 0.0);
  // cap * tanh(x / cap), as Gemma writes it.
  TensorId SoftCap(const std::string& name, TensorId x, double cap);
  // x * factor (kScale) or x + addend (kAddScalar).
  TensorId ScalarOp(OpKind kind, const std::string& name, TensorId x, double scalar);

  OpGraph& graph_;
  TensorId last_attention_weights_;
  std::vector<TensorId> sdpa_window_masks_;  // held by the model's forward (DecoderMask)
  const ModelSpec& spec_;
  const GraphOptions& options_;
  std::set<std::string> lora_roles_;
  bool conv1d_linears_ = false;
};

// What PEFT users usually target when they name nothing: q,v (qkv for GPT-2).
std::vector<std::string> DefaultLoraTargets(ModelFamily family);

// The LoRA roles a family's linears have, and the roles named by user targets (short
// names like q,v or Hugging Face module names like q_proj, c_attn). Unknown targets are
// an error listing what exists.
Result<std::set<std::string>> ResolveLoraRoles(const ModelSpec& spec,
                                               const std::vector<std::string>& targets);

}  // namespace headroom
