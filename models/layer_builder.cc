#include "models/layer_builder.h"

#include <cmath>
#include <map>
#include <numbers>

#include <fmt/format.h>

namespace headroom {

namespace {
// fp32 weights with a 16-bit frozen base (LoRA) still multiply in 16 bits.
bool RunsHalfMatmulsOnCpu(const TrainingConfig& config) {
  const bool half_base = config.base_dtype && *config.base_dtype != DType::kF32;
  return !config.kernels.cuda && (config.precision != Precision::kFp32 || half_base);
}
}  // namespace

GraphOptions GraphOptionsOf(const TrainingConfig& config) {
  const bool python = RunsPythonStack(config.stack);
  return {.fine_tune = config.fine_tune,
          .kv_cache = KeepsKvCache(config),
          .attention_call = AttentionCallOf(config),
          .copy_head_views = python && config.micro_batch > 1,
          .peft_casts = python,
          .hold_model_outputs = python,
          .python_references = python,
          .seq_len = config.seq_len,
          .precision = config.precision,
          .stack = config.stack,
          .base_dtype = config.base_dtype,
          .single_sample = config.micro_batch == 1,
          .cpu_bf16_matmul = RunsHalfMatmulsOnCpu(config)
                                 ? std::optional<CpuBf16>(config.kernels.cpu_bf16)
                                 : std::nullopt,
          .images_per_sample = config.images_per_sample,
          .kernel_packages = config.kernel_packages,
          .loss = config.loss,
          .padding_free = config.packing == Packing::kPaddingFree,
          .packed_mask = MasksPackedSamples(config)};
}

SymShape TokenShape(int64_t n) { return {Dim::B(), Dim::S(), Dim::C(n)}; }
SymShape HeadsShape(int64_t heads, int64_t head_dim) {
  return {Dim::B(), Dim::C(heads), Dim::S(), Dim::C(head_dim)};
}

LayerBuilder::LayerBuilder(OpGraph& graph, const ModelSpec& spec, const GraphOptions& options,
                           std::set<std::string> lora_roles)
    : graph_(graph), spec_(spec), options_(options), lora_roles_(std::move(lora_roles)) {}

TensorId LayerBuilder::Op(OpKind kind, const std::string& name, std::vector<TensorId> inputs,
                          SymShape out_shape, double dropout_p) {
  return graph_.AddOp(
      {.kind = kind, .name = name, .inputs = std::move(inputs), .dropout_p = dropout_p},
      {{.name = name, .shape = std::move(out_shape)}})[0];
}

TensorId LayerBuilder::ScalarOp(OpKind kind, const std::string& name, TensorId x, double scalar) {
  return graph_.AddOp({.kind = kind, .name = name, .inputs = {x}, .scalar = scalar},
                      {{.name = name, .shape = graph_.tensor(x).shape}})[0];
}

TensorId LayerBuilder::Param(const std::string& name, SymShape shape, bool always_trainable) {
  const bool full = options_.fine_tune.mode == FineTuneMode::kFull;
  return graph_.AddParameter(name, std::move(shape), {.trainable = full || always_trainable});
}

TensorId LayerBuilder::Linear(const std::string& name, const std::string& role, TensorId x,
                              int64_t in, int64_t out, bool bias, bool in_block,
                              bool per_sequence) {
  const FineTuneMode mode = options_.fine_tune.mode;
  ParamOptions weight_options{.trainable = mode == FineTuneMode::kFull,
                              .quantized = mode == FineTuneMode::kQLora && in_block};
  TensorId w = graph_.AddParameter(name + ".weight", {Dim::C(out), Dim::C(in)}, weight_options);
  std::vector<TensorId> inputs = {x, w};
  if (bias)
    inputs.push_back(graph_.AddParameter(name + ".bias", {Dim::C(out)},
                                         {.trainable = mode == FineTuneMode::kFull}));
  const SymShape out_shape = per_sequence ? SymShape{Dim::B(), Dim::C(out)} : TokenShape(out);
  TensorId y = graph_.AddOp({.kind = OpKind::kLinear,
                             .name = name,
                             .inputs = std::move(inputs),
                             .weight_in_out = conv1d_linears_},
                            {{.name = name, .shape = out_shape}})[0];
  if (mode == FineTuneMode::kFull || !lora_roles_.count(role)) return y;

  // PEFT: result + lora_B(lora_A(dropout(x))) * (alpha / r).
  const int64_t r = options_.fine_tune.lora_rank;
  const ParamOptions adapter{.trainable = true, .lora_adapter = true};
  TensorId a = graph_.AddParameter(name + ".lora_A.weight", {Dim::C(r), Dim::C(in)}, adapter);
  TensorId b = graph_.AddParameter(name + ".lora_B.weight", {Dim::C(out), Dim::C(r)}, adapter);
  if (options_.peft_casts)
    x = Op(OpKind::kCastLike, name + ".lora_input_cast", {x, a}, graph_.tensor(x).shape);
  TensorId dropped = Dropout(name + ".lora_dropout", x, options_.fine_tune.lora_dropout);
  const SymShape rank_shape = per_sequence ? SymShape{Dim::B(), Dim::C(r)} : TokenShape(r);
  TensorId ax = Op(OpKind::kLinear, name + ".lora_A", {dropped, a}, rank_shape);
  TensorId bx = Op(OpKind::kLinear, name + ".lora_B", {ax, b}, out_shape);
  TensorId scaled = ScalarOp(OpKind::kScale, name + ".lora_scale", bx,
                             options_.fine_tune.lora_alpha / static_cast<double>(r));
  TensorId sum = Op(OpKind::kAdd, name + ".lora_add", {y, scaled}, out_shape);
  if (options_.peft_casts)
    sum = Op(OpKind::kCastLike, name + ".lora_output_cast", {sum, y}, out_shape);
  return sum;
}

TensorId LayerBuilder::LinearWithWeight(const std::string& name, TensorId x, TensorId weight,
                                        SymShape out_shape) {
  return Op(OpKind::kLinear, name, {x, weight}, std::move(out_shape));
}

TensorId LayerBuilder::Embedding(const std::string& name, TensorId ids, TensorId weight,
                                 SymShape out_shape) {
  return Op(OpKind::kEmbedding, name, {ids, weight}, std::move(out_shape));
}

TensorId LayerBuilder::Dropout(const std::string& name, TensorId x, double p) {
  if (p <= 0.0) return x;
  return Op(OpKind::kDropout, name, {x}, graph_.tensor(x).shape, p);
}

TensorId LayerBuilder::LayerNorm(const std::string& name, TensorId x, int64_t width) {
  TensorId w = Param(name + ".weight", {Dim::C(width)});
  TensorId b = Param(name + ".bias", {Dim::C(width)});
  return graph_.AddOp(
      {.kind = OpKind::kLayerNorm, .name = name, .inputs = {x, w, b}, .eps = spec_.norm_eps},
      {{.name = name, .shape = graph_.tensor(x).shape}})[0];
}

TensorId LayerBuilder::RmsNorm(const std::string& name, TensorId x, int64_t width) {
  TensorId w = Param(name + ".weight", {Dim::C(width)});
  return graph_.AddOp(
      {.kind = OpKind::kRmsNorm, .name = name, .inputs = {x, w}, .eps = spec_.norm_eps},
      {{.name = name, .shape = graph_.tensor(x).shape}})[0];
}

TensorId LayerBuilder::GemmaRmsNorm(const std::string& name, TensorId x, int64_t width) {
  TensorId w = Param(name + ".weight", {Dim::C(width)});
  return graph_.AddOp(
      {.kind = OpKind::kGemmaRmsNorm, .name = name, .inputs = {x, w}, .eps = spec_.norm_eps},
      {{.name = name, .shape = graph_.tensor(x).shape}})[0];
}

TensorId LayerBuilder::Scaled(const std::string& name, TensorId x, double factor) {
  return ScalarOp(OpKind::kScale, name, x, factor);
}

TensorId LayerBuilder::Unary(OpKind kind, const std::string& name, TensorId x) {
  return Op(kind, name, {x}, graph_.tensor(x).shape);
}

TensorId LayerBuilder::Activation(const std::string& name, TensorId x) {
  if (spec_.activation == "silu") return Unary(OpKind::kSilu, name, x);
  if (spec_.activation == "gelu") return Unary(OpKind::kGelu, name, x);
  if (spec_.activation == "gelu_pytorch_tanh") return Unary(OpKind::kGeluTanh, name, x);
  // NewGELUActivation: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), op by op;
  // autograd keeps x, the tanh, 0.5 * x and 1 + tanh.
  TensorId half = ScalarOp(OpKind::kScale, name + ".half", x, 0.5);
  TensorId cube = Unary(OpKind::kCube, name + ".cube", x);
  TensorId cube_scaled = ScalarOp(OpKind::kScale, name + ".cube_scaled", cube, 0.044715);
  TensorId inner = Binary(OpKind::kAdd, name + ".inner", x, cube_scaled);
  TensorId inner_scaled =
      ScalarOp(OpKind::kScale, name + ".inner_scaled", inner, std::sqrt(2.0 / std::numbers::pi));
  TensorId tanh = Unary(OpKind::kTanh, name + ".tanh", inner_scaled);
  TensorId one_plus = ScalarOp(OpKind::kAddScalar, name + ".one_plus", tanh, 1.0);
  TensorId y = Binary(OpKind::kMul, name, half, one_plus);
  HeldUntilModuleReturns(x, y);  // activations.py: `input` is used to the end
  return y;
}

TensorId LayerBuilder::SoftCap(const std::string& name, TensorId x, double cap) {
  // x / cap, tanh (which saves its result), * cap: three new tensors, op by op.
  TensorId divided = ScalarOp(OpKind::kScale, name + ".div", x, 1.0 / cap);
  TensorId tanh = Unary(OpKind::kTanh, name + ".tanh", divided);
  return ScalarOp(OpKind::kScale, name, tanh, cap);
}

TensorId LayerBuilder::Binary(OpKind kind, const std::string& name, TensorId a, TensorId b) {
  return Op(kind, name, {a, b}, graph_.tensor(a).shape);
}

TensorId LayerBuilder::View(const std::string& name, TensorId x, SymShape shape) {
  return graph_.AddOp({.kind = OpKind::kView, .name = name, .inputs = {x}},
                      {{.name = name, .shape = std::move(shape), .alias_of = x}})[0];
}

TensorId LayerBuilder::CausalMaskIfEager(TensorId hidden, int64_t sliding_window) {
  if (options_.attention_call.impl != AttentionImpl::kEager) return TensorId{};
  const std::string name = sliding_window > 0 ? "sliding_window_mask" : "causal_mask";
  return graph_.AddOp({.kind = OpKind::kCausalMask,
                       .name = name,
                       .inputs = {hidden},
                       .sliding_window = sliding_window},
                      {{.name = name, .shape = {Dim::B(), Dim::C(1), Dim::S(), Dim::S()}}})[0];
}

TensorId LayerBuilder::DecoderMask(TensorId hidden, int64_t window) {
  if (options_.attention_call.impl == AttentionImpl::kEager)
    return CausalMaskIfEager(hidden, window);
  // Packed samples: sdpa_mask never skips (allow_is_causal_skip is False), so every mask
  // is made, the causal one included.
  const bool packed = options_.packed_mask && options_.attention_call.impl == AttentionImpl::kSdpa;
  if (!packed &&
      (window <= 0 || !SdpaTakesWindowMask(spec_, options_.attention_call.impl, options_.seq_len)))
    return TensorId{};
  const std::string name =
      std::string(packed ? "packed_" : "") + (window > 0 ? "sliding_window_mask" : "causal_mask");
  const TensorId mask = graph_.AddOp({.kind = OpKind::kWindowMask,
                                      .name = name,
                                      .inputs = {hidden},
                                      .sliding_window = window,
                                      .packed_samples = packed},
                                     {{.name = name,
                                       .shape = {Dim::C(1), Dim::C(1), Dim::S(), Dim::S()},
                                       .fixed_dtype = DType::kBool}})[0];
  sdpa_window_masks_.push_back(mask);
  return mask;
}

std::array<TensorId, 2> LayerBuilder::RopeTables(const std::string& op_name,
                                                 const std::string& name, TensorId x,
                                                 const RopeParams& rope) {
  const SymShape shape{Dim::C(1), Dim::S(), Dim::C(spec_.head_dim)};
  std::vector<TensorId> inputs{x};
  // transformers' rotary module holds inv_freq, fp32 [head_dim / 2], and a clone,
  // original_inv_freq, as buffers (`self.inv_freq = nn.Buffer(inv_freq, persistent=False)`
  // and `self.original_inv_freq = nn.Buffer(inv_freq.clone(), ...)` in each family's
  // RotaryEmbedding, modeling_llama.py): both move to the device with the model and stay
  // the whole run; the tables read the first.
  if (python_references()) {
    const SymShape half{Dim::C(spec_.head_dim / 2)};
    inputs.push_back(graph_.AddBuffer(op_name + ".inv_freq", half, DType::kF32));
    graph_.AddBuffer(op_name + ".original_inv_freq", half, DType::kF32);
  }
  auto t = graph_.AddOp(
      {.kind = OpKind::kRopeTables, .name = op_name, .inputs = std::move(inputs), .rope = rope},
      {{.name = name + ".cos", .shape = shape}, {.name = name + ".sin", .shape = shape}});
  return {t[0], t[1]};
}

TensorId LayerBuilder::HeadsSlice(const std::string& name, TensorId x, int64_t begin, int64_t heads,
                                  int64_t head_dim) {
  return graph_.AddOp({.kind = OpKind::kView, .name = name, .inputs = {x}, .slice_begin = begin},
                      {{.name = name, .shape = HeadsShape(heads, head_dim), .alias_of = x}})[0];
}

std::vector<TensorId> LayerBuilder::SplitView(const std::string& name, TensorId x,
                                              const std::vector<std::string>& parts,
                                              SymShape part_shape) {
  std::vector<TensorInfo> outputs;
  for (const std::string& part : parts)
    outputs.push_back({.name = name + "." + part, .shape = part_shape, .alias_of = x});
  return graph_.AddOp({.kind = OpKind::kView, .name = name, .inputs = {x}}, std::move(outputs));
}

TensorId LayerBuilder::Attention(const std::string& prefix, TensorId q, TensorId k, TensorId v,
                                 TensorId mask, bool causal, bool contiguous_query) {
  const int64_t heads = spec_.num_heads, d = spec_.head_dim;
  if (options_.kv_cache && causal) {
    const int64_t kv = spec_.num_kv_heads;
    k = Op(OpKind::kKvCacheCopy, prefix + ".cache_k", {k}, HeadsShape(kv, d));
    v = Op(OpKind::kKvCacheCopy, prefix + ".cache_v", {v}, HeadsShape(kv, d));
    graph_.HoldUntilForwardEnd(k);
    graph_.HoldUntilForwardEnd(v);
  }
  AttentionCall call = options_.attention_call;
  call.masked = mask.valid() && call.impl != AttentionImpl::kEager;
  const AttentionKernelChoice kernel = ChooseAttentionKernel(spec_, call);
  const double scale =
      spec_.query_pre_attn_scalar > 0 ? 1.0 / std::sqrt(spec_.query_pre_attn_scalar) : 0.0;
  if (kernel.repeats_kv) {
    auto repeat = [&](TensorId t, const std::string& name) {
      return graph_.AddOp({.kind = OpKind::kRepeatKv,
                           .name = name,
                           .inputs = {t},
                           .attention_kernel = kernel.kernel},
                          {{.name = name, .shape = HeadsShape(heads, d)}})[0];
    };
    k = repeat(k, prefix + ".repeat_k");
    v = repeat(v, prefix + ".repeat_v");
  }
  TensorId context;
  last_attention_weights_ = TensorId{};
  if (kernel.kernel != AttentionKernel::kEager) {
    std::vector<TensorId> inputs = {q, k, v};
    if (call.masked) inputs.push_back(mask);
    context = graph_.AddOp({.kind = OpKind::kSdpa,
                            .name = prefix + ".sdpa",
                            .inputs = std::move(inputs),
                            .dropout_p = spec_.attention_dropout,
                            .causal = causal && !call.masked,  // the mask carries causality
                            .attention_kernel = kernel.kernel,
                            .contiguous_query = contiguous_query,
                            .attention_scale = scale},
                           {{.name = prefix + ".sdpa", .shape = HeadsShape(heads, d)}})[0];
  } else {
    auto matmul_operand = [&](TensorId t, const char* name) {
      if (!options_.copy_head_views || !graph_.tensor(t).alias_of) return t;
      return Op(OpKind::kContiguous, prefix + name, {t}, graph_.tensor(t).shape);
    };
    q = matmul_operand(q, ".q_copy");
    k = matmul_operand(k, ".k_copy");
    // Gemma 2 soft-caps the scores before the mask (modeling_gemma2.py:176-207): the mask
    // is then its own add.
    const double cap = spec_.attn_logit_softcap;
    std::vector<TensorId> score_inputs = {q, k};
    if (mask.valid() && cap <= 0) score_inputs.push_back(mask);
    const SymShape scores_shape{Dim::B(), Dim::C(heads), Dim::S(), Dim::S()};
    TensorId scores = graph_.AddOp({.kind = OpKind::kAttnScores,
                                    .name = prefix + ".scores",
                                    .inputs = std::move(score_inputs),
                                    .attention_scale = scale},
                                   {{.name = prefix + ".scores", .shape = scores_shape}})[0];
    if (cap > 0) {
      scores = SoftCap(prefix + ".softcap", scores, cap);
      if (mask.valid())
        scores = Op(OpKind::kAdd, prefix + ".mask_add", {scores, mask}, scores_shape);
    }
    // LLaMA-family code takes softmax in fp32 and casts to the query's dtype; GPT-2 casts
    // to the value's dtype; BERT keeps the scores' dtype.
    const bool llama = IsLlamaLike(spec_.family);
    TensorId probs = graph_.AddOp({.kind = OpKind::kSoftmax,
                                   .name = prefix + ".softmax",
                                   .inputs = {scores},
                                   .upcast = llama},
                                  {{.name = prefix + ".softmax", .shape = scores_shape}})[0];
    if (spec_.family != ModelFamily::kBert) {
      probs = Op(OpKind::kCastLike, prefix + ".softmax_cast", {probs, llama ? q : v}, scores_shape);
    }
    probs = Dropout(prefix + ".attn_dropout", probs, spec_.attention_dropout);
    last_attention_weights_ = probs;
    v = matmul_operand(v, ".v_copy");
    context = Op(OpKind::kAttnContext, prefix + ".context", {probs, v}, HeadsShape(heads, d));
  }
  return Op(OpKind::kMergeHeads, prefix + ".merge_heads", {context}, TokenShape(heads * d));
}

void LayerBuilder::HoldAsModelOutput(TensorId t) {
  if (options_.hold_model_outputs) graph_.HoldUntilForwardEnd(t);
}

void LayerBuilder::HeldUntilModuleReturns(TensorId input, TensorId module_output) {
  if (options_.python_references)
    graph_.HoldUntilOpRan(input, graph_.tensor(module_output).producer);
}

// input_ids, held by the loop until its backward returns, and labels: the same tensor in the
// loop (`labels=ids`), or, for padding-free rows, a tensor of their own beside position_ids,
// both held alike (DataCollatorWithFlattening returns all three).
std::pair<TensorId, TensorId> LayerBuilder::CausalLmBatch() {
  const TensorId ids = graph_.AddInput("input_ids", {Dim::B(), Dim::S()}, DType::kI64);
  graph_.MarkBatchInput(ids);
  const TensorId labels = graph_.AddInput("labels", {Dim::B(), Dim::S()}, DType::kI64);
  if (options_.padding_free) {
    graph_.MarkBatchInput(labels);
    graph_.MarkBatchInput(graph_.AddInput("position_ids", {Dim::B(), Dim::S()}, DType::kI64));
  }
  return {ids, labels};
}

TensorId LayerBuilder::ChunkedLanguageModelLoss(TensorId x, TensorId lm_weight, TensorId labels) {
  // add_fused_lm_head's forward holds the backbone's output until it returns; the loss
  // is its only output the training loop keeps.
  HoldAsModelOutput(x);
  TensorId loss = graph_.AddOp({.kind = OpKind::kChunkedNll,
                                .name = "chunked_nll",
                                .inputs = {x, lm_weight, labels},
                                .vocab_tile = options_.loss.vocab_tile,
                                .logit_softcap = spec_.final_logit_softcap},
                               {{.name = "chunked_nll", .shape = SymShape{}}})[0];
  graph_.SetLoss(loss);
  return loss;
}

TensorId LayerBuilder::LanguageModelLoss(TensorId x, TensorId lm_weight, TensorId labels) {
  if (options_.loss.chunked()) return ChunkedLanguageModelLoss(x, lm_weight, labels);
  const int64_t vocab = spec_.vocab_size;
  TensorId logits = LinearWithWeight("lm_head", x, lm_weight, TokenShape(vocab));
  // Gemma's final_logit_softcapping, in the logits' dtype before the loss upcasts them
  // (modeling_gemma2.py:519-523, modeling_gemma3.py:616-620).
  if (spec_.final_logit_softcap > 0)
    logits = SoftCap("logits.softcap", logits, spec_.final_logit_softcap);
  HoldAsModelOutput(x);
  HoldAsModelOutput(logits);
  TensorId logits32 = Op(OpKind::kCastF32, "logits.float", {logits}, TokenShape(vocab));
  std::vector<TensorId> loss_inputs = {labels};
  TensorId padded;
  if (options_.hold_model_outputs) {
    // transformers' ForCausalLMLoss (loss/loss_utils.py): `labels = pad(labels, (0,
    // 1))`, then `shift_labels = labels[..., 1:].contiguous()`: a [b, s + 1] copy and a
    // [b, s] one, both locals of the function until the loss returns.
    padded = Op(OpKind::kContiguous, "labels.pad", {labels}, {Dim::B(), Dim::SPlus(1)});
    loss_inputs.push_back(Op(OpKind::kContiguous, "labels.shift", {padded}, {Dim::B(), Dim::S()}));
  }
  TensorId log_probs = Op(OpKind::kLogSoftmax, "log_softmax", {logits32}, TokenShape(vocab));
  loss_inputs.insert(loss_inputs.begin(), log_probs);
  TensorId loss = Op(OpKind::kNllLoss, "nll_loss", std::move(loss_inputs), SymShape{});
  if (options_.hold_model_outputs) {
    // Its `logits = logits.float().view(-1, vocab)` local holds the fp32 logits, and
    // `labels` the padded copy, through nll_loss.
    graph_.HoldUntilOpRan(logits32, graph_.tensor(loss).producer);
    graph_.HoldUntilOpRan(padded, graph_.tensor(loss).producer);
  }
  graph_.SetLoss(loss);
  return loss;
}

void LayerBuilder::EndDecoderLayer(TensorId block_input, TensorId attn_weights, TensorId out) {
  HeldUntilModuleReturns(block_input, out);
  if (attn_weights.valid()) HeldUntilModuleReturns(attn_weights, out);
  graph_.EndBlock(out);
}

void LayerBuilder::CausalLmHead(TensorId normed, TensorId inputs_embeds, TensorId embed,
                                TensorId labels) {
  HeldUntilModuleReturns(inputs_embeds, normed);
  for (TensorId mask : sdpa_window_masks_) HeldUntilModuleReturns(mask, normed);
  TensorId lm_weight =
      spec_.tie_embeddings
          ? embed
          : Param("lm_head.weight", {Dim::C(spec_.vocab_size), Dim::C(spec_.hidden_size)});
  LanguageModelLoss(normed, lm_weight, labels);
}

TensorId LayerBuilder::ClassificationLoss(TensorId logits, TensorId labels, int64_t num_labels) {
  const SymShape shape{Dim::B(), Dim::C(num_labels)};
  TensorId logits32 = Op(OpKind::kCastF32, "logits.float", {logits}, shape);
  TensorId log_probs = Op(OpKind::kLogSoftmax, "log_softmax", {logits32}, shape);
  TensorId loss = Op(OpKind::kNllLoss, "nll_loss", {log_probs, labels}, SymShape{});
  graph_.SetLoss(loss);
  return loss;
}

std::vector<std::string> DefaultLoraTargets(ModelFamily family) {
  // PEFT has no default for phi3 (it asks for target_modules); the fused qkv_proj is what
  // q,v means there.
  if (family == ModelFamily::kGpt2 || family == ModelFamily::kPhi3) return {"qkv"};
  // An imported model's targets go to PEFT as they are: module names.
  if (family == ModelFamily::kImported) return {"q_proj", "v_proj"};
  return {"q", "v"};
}

Result<std::set<std::string>> ResolveLoraRoles(const ModelSpec& spec,
                                               const std::vector<std::string>& targets) {
  // Short role names, and Hugging Face module names mapped onto them.
  std::map<std::string, std::vector<std::string>> names;
  const std::vector<std::string> defaults = DefaultLoraTargets(spec.family);
  switch (spec.family) {
    case ModelFamily::kImported: {  // PEFT resolves the module names when it is imported
      const std::vector<std::string>& named = targets.empty() ? defaults : targets;
      return std::set<std::string>(named.begin(), named.end());
    }
    case ModelFamily::kLlama:
    case ModelFamily::kQwen3:
    case ModelFamily::kGemma2:
    case ModelFamily::kGemma3:
      names = {{"q", {"q"}},        {"k", {"k"}},           {"v", {"v"}},
               {"o", {"o"}},        {"gate", {"gate"}},     {"up", {"up"}},
               {"down", {"down"}},  {"q_proj", {"q"}},      {"k_proj", {"k"}},
               {"v_proj", {"v"}},   {"o_proj", {"o"}},      {"gate_proj", {"gate"}},
               {"up_proj", {"up"}}, {"down_proj", {"down"}}};
      break;
    case ModelFamily::kQwen3Moe:
    case ModelFamily::kMixtral:
      // Every MLP is a mixture of experts: 3-D parameters and a router that are not
      // nn.Linear modules, which PEFT's target_modules cannot adapt.
      names = {{"q", {"q"}},      {"k", {"k"}},      {"v", {"v"}},      {"o", {"o"}},
               {"q_proj", {"q"}}, {"k_proj", {"k"}}, {"v_proj", {"v"}}, {"o_proj", {"o"}}};
      break;
    case ModelFamily::kGpt2:
      names = {{"qkv", {"qkv"}},    {"o", {"o"}},     {"up", {"up"}},           {"down", {"down"}},
               {"c_attn", {"qkv"}}, {"c_fc", {"up"}}, {"c_proj", {"o", "down"}}};
      break;
    case ModelFamily::kPhi3:
      names = {{"qkv", {"qkv"}},
               {"o", {"o"}},
               {"gate_up", {"gate_up"}},
               {"down", {"down"}},
               {"qkv_proj", {"qkv"}},
               {"o_proj", {"o"}},
               {"gate_up_proj", {"gate_up"}},
               {"down_proj", {"down"}}};
      break;
    case ModelFamily::kBert:
      names = {{"q", {"q"}},     {"k", {"k"}},   {"v", {"v"}},
               {"o", {"o"}},     {"up", {"up"}}, {"down", {"down"}},
               {"query", {"q"}}, {"key", {"k"}}, {"value", {"v"}}};
      break;
  }
  std::set<std::string> roles;
  for (const std::string& t : targets.empty() ? defaults : targets) {
    auto it = names.find(t);
    if (it == names.end()) {
      std::string known;
      for (const auto& [n, _] : names) known += (known.empty() ? "" : ", ") + n;
      const bool fused = spec.family == ModelFamily::kGpt2 || spec.family == ModelFamily::kPhi3;
      std::string hint = fused && (t == "q" || t == "k" || t == "v" || t == "q_proj" ||
                                   t == "k_proj" || t == "v_proj")
                             ? fmt::format(" ({} fuses q, k and v into one projection: target qkv)",
                                           FamilyName(spec.family))
                             : "";
      if (spec.is_moe() && (t == "gate" || t == "up" || t == "down" || t == "gate_proj" ||
                            t == "up_proj" || t == "down_proj" || t == "experts"))
        hint =
            " (its MLPs are mixtures of experts, 3-D parameters that PEFT's target_modules "
            "cannot adapt)";
      return MakeError(fmt::format("LoRA target '{}' does not exist in {}{}; available: {}", t,
                                   spec.name, hint, known));
    }
    roles.insert(it->second.begin(), it->second.end());
  }
  return roles;
}

}  // namespace headroom
