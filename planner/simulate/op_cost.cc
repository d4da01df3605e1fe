#include "planner/simulate/op_cost.h"

#include <algorithm>
#include <stdexcept>

#include "planner/simulate/internal/attention_shapes.h"
#include "planner/simulate/internal/cost_rule_parts.h"
#include "planner/simulate/internal/moe_cost_rules.h"
#include "planner/simulate/internal/traced_cost_rule.h"

namespace headroom {
namespace cost_rules {

// Autocast copies of inputs whose dtype changes; saved when the op saves that input.
void AddAutocastCasts(const OpView& v, ForwardCost& cost) {
  for (size_t i = 0; i < v.op.inputs.size(); ++i) {
    if (!v.states.IsCast(v.op, i)) continue;
    if (v.quantized_weight() && i == 1) continue;  // NF4 is dequantized, not cast
    const DType used = v.states.UsedDType(v.op, i);
    cost.internals.push_back(
        {.label = v.op.kind == OpKind::kGroupedMm ? "x.to(weight dtype)" : "autocast copy",
         .bytes = StorageBytes(used, v.in_numel(i)),
         .lifetime = cost.saves_input[i] ? Lifetime::kSaved : Lifetime::kTransient,
         .cast_of_input = static_cast<int>(i),
         .per_sample = v.graph.tensor(v.in(i)).shape.ScalesWithBatch()});
  }
}

// oneDNN's brgemm matmul, the kernels whose scratchpad onednn_scratch.h models.
bool IsBrgemm(CpuBf16 kernel) { return kernel == CpuBf16::kAvx512Bf16 || kernel == CpuBf16::kAmx; }

// A linear whose weight is stored [in, out] (GPT-2's transformers Conv1D).
bool IsConv1d(const OpView& v) { return v.op.weight_in_out && v.states.target().conv1d_weights; }

// The op's matrix product as oneDNN blocks it: [tokens, out] for a linear (the tokens
// grow with the micro-batch), [b, heads, rows, out] for a batched product (the batch
// grows); with `input_gradient`, the product dY @ W, whose output is input 0's shape.
// F.linear multiplies by the view W^T (a transposed B), addmm(b, x, W) for GPT-2's
// Conv1D by W itself, and each input gradient by the other. Attention's products are
// planned with a plain B: eager attention's k^T and v reach bmm through matmul's
// reshape, a copy unless the head dimensions happen to merge, and on the table's shapes
// the AMX rule never books less for a plain B than for a transposed one.
BrgemmProduct ProductOf(const OpView& v, bool input_gradient, CpuBf16 kernel) {
  const auto& out = v.graph.tensor(v.op.outputs[0]).shape.dims();
  const int64_t out_width = SizeIn(out.back(), v.env);
  const int64_t in_width = SizeIn(v.graph.tensor(v.in(0)).shape.dims().back(), v.env);
  BrgemmProduct p{.kernel = kernel,
                  .inner = input_gradient ? out_width : in_width,
                  .cols = input_gradient ? in_width : out_width,
                  .threads = v.cpu_threads()};
  if (v.op.kind == OpKind::kLinear) {
    p.rows = v.out_numel() / out_width;
    p.transposed_second = input_gradient == IsConv1d(v);
  } else {
    p.rows = SizeIn(out[out.size() - 2], v.env);
    p.batch = v.out_numel() / (p.rows * out_width);
    p.grows = BrgemmProduct::Grows::kBatch;
  }
  return p;
}

// The scratch of a bf16 matrix product on the CPU, by kernel (CostTarget::cpu_bf16_matmul).
void AddCpuBf16ForwardScratch(const OpView& v, ForwardCost& cost) {
  const OpNode& op = v.op;
  if (op.kind == OpKind::kGroupedMm) return;  // measured: no scratch
  if (op.kind == OpKind::kTraced) {
    // oneDNN's scratch rules are per built kind; an imported graph is refused under any
    // kernel but ATen's (CheckImportedCpuKernel), which has none.
    if (const auto kernel = v.cpu_bf16_matmul(); kernel && *kernel != CpuBf16::kAtenGemm)
      throw std::logic_error("no oneDNN scratch rule for the imported product " + op.name);
    return;
  }
  if (const auto kernel = v.cpu_bf16_matmul(); kernel && IsBrgemm(*kernel)) {
    cost.brgemm = ProductOf(v, false, *kernel);
  }
  if (v.cpu_bf16_matmul() == CpuBf16::kEmulated) {
    if (op.kind == OpKind::kLinear) {
      cost.workspace_bytes += 2 * v.out_bytes();  // the whole fp32 product
    } else {
      // A batched product computes one [rows, cols] matrix at a time into fp32.
      const int64_t heads = v.graph.tensor(op.outputs[0]).shape.dims().at(1).value;
      cost.internals.push_back({.label = "bf16 emulation scratch",
                                .bytes = StorageBytes(DType::kF32, v.out_numel() / heads),
                                .lifetime = Lifetime::kTransient,
                                .per_sample = false});
    }
  }
}

void AddCpuBf16BackwardScratch(const OpView& v, BackwardCost& cost) {
  const OpNode& op = v.op;
  if (op.kind == OpKind::kGroupedMm || op.kind == OpKind::kTraced) return;  // as the forward
  if (const auto kernel = v.cpu_bf16_matmul(); kernel && IsBrgemm(*kernel)) {
    // The input gradient dY @ W: the forward's product with the output width inner.
    if (cost.input_grads[0] == GradFlow::kNew) cost.input_grad_brgemm = ProductOf(v, true, *kernel);
    // A linear's weight gradient multiplies a transposed operand, the tokens inner: dY^T @ x
    // (torch's mm_mat2_backward for F.linear's W.t()), or x^T @ dY for a Conv1D's W.
    if (op.kind == OpKind::kLinear && cost.input_grads[1] == GradFlow::kNew) {
      const BrgemmProduct forward = ProductOf(v, false, *kernel);
      const bool conv1d = IsConv1d(v);
      cost.weight_grad_brgemm = {.kernel = *kernel,
                                 .rows = conv1d ? forward.inner : forward.cols,
                                 .inner = forward.rows,
                                 .cols = conv1d ? forward.cols : forward.inner,
                                 .grows = BrgemmProduct::Grows::kInner,
                                 .transposed_first = true,
                                 .threads = v.cpu_threads()};
    }
  }
  if (v.cpu_bf16_matmul() == CpuBf16::kEmulated && op.kind == OpKind::kLinear) {
    // Each gradient product has its fp32 scratch: the input's scales with the
    // micro-batch, the weight's does not.
    if (cost.input_grads[0] == GradFlow::kNew)
      cost.input_grad_scratch_bytes += 2 * StorageBytes(DType::kBF16, v.in_numel(0));
    if (cost.input_grads[1] == GradFlow::kNew)
      cost.weight_grad_scratch_bytes = StorageBytes(DType::kF32, v.in_numel(1));
  }
}

struct AttentionProductFlops {  // q @ k^T and p @ v each cost 2 * (b * heads * s * d) * s
  static OpFlops Flops(const OpView& v) {
    const TensorId bhsd = v.op.kind == OpKind::kAttnContext ? v.op.outputs[0] : v.in(0);
    const double one =
        2.0 * static_cast<double>(v.numel(bhsd)) * static_cast<double>(v.env.seq_len);
    const double forward = v.op.kind == OpKind::kSdpa ? 2 * one : one;
    return {forward, 2 * forward};
  }
};

template <>
struct CostRule<OpKind::kEmbedding> : FlopsOfClass {
  static void Forward(ForwardRule& r) { r.SaveIf(0, r.v.grad(1)); }  // indices, for dW
  static void Backward(BackwardRule& r) { r.cost.input_grads[0] = GradFlow::kNone; }
};

// bitsandbytes' per-call dequantization of an NF4 weight with double quantization: the
// blocks' fp32 absmax first (`dequantize_blockwise` + offset), then the weight in the
// compute dtype, both live until the matmul has run (`_gemm_4bit_default_impl`,
// backends/default/ops.py, in the forward; `functional.dequantize_4bit` in the backward).
int64_t Nf4DequantizedBytes(const OpView& v) {
  return StorageBytes(v.states.regime().compute_dtype, v.in_numel(1)) +
         StorageBytes(DType::kF32, Nf4Blocks(v.in_numel(1)));
}

template <>
struct CostRule<OpKind::kLinear> {
  static void Forward(ForwardRule& r) {
    if (r.v.quantized_weight()) {
      // bitsandbytes dequantizes the NF4 weight into a compute-dtype buffer per call
      // and saves only the quantized state.
      r.cost.internals.push_back({.label = "NF4 dequantized weight",
                                  .bytes = Nf4DequantizedBytes(r.v),
                                  .lifetime = Lifetime::kTransient,
                                  .weight_copy = true,
                                  .per_sample = false});
      return;
    }
    SavesOperandsForEachOther::Forward(r);  // x for dW, W for dx
  }
  static void Backward(BackwardRule& r) {
    if (!r.v.quantized_weight()) return;
    r.cost.input_grads[1] = GradFlow::kNone;
    if (r.v.grad(0)) r.cost.workspace_bytes = Nf4DequantizedBytes(r.v);
    r.cost.workspace_per_sample = false;
  }
  static OpFlops Flops(const OpView& v) {
    const double mm = 2.0 * static_cast<double>(v.out_numel()) * static_cast<double>(v.last_dim(0));
    return {mm, (v.grad(0) ? mm : 0.0) + (v.grad(1) ? mm : 0.0)};
  }
};

template <>
struct CostRule<OpKind::kLayerNorm> : NewGradients, FlopsOfClass {
  static void Forward(ForwardRule& r) {
    r.SaveIf(0, true);
    const int64_t rows = r.v.in_numel(0) / r.v.last_dim(0);
    const DType stats = StatsDType(r.v);
    r.Internal("layer_norm mean", StorageBytes(stats, rows), r.SavedOr(true));
    r.Internal("layer_norm rstd", StorageBytes(stats, rows), r.SavedOr(true));
  }
  // CUDA's layer_norm keeps its statistics in the accumulate type (fp32); the CPU's in the
  // parameters' type: the input's, or fp32 when a 16-bit input meets fp32 weights
  // (layer_norm.cpp, layer_norm_cpu: param_scalar_type(input, mixed_type)).
  static DType StatsDType(const OpView& v) {
    const DType in = v.states.UsedDType(v.op, 0);
    if (v.states.target().cuda_autocast || in == DType::kF32) return DType::kF32;
    return v.states.UsedDType(v.op, 1) == DType::kF32 ? DType::kF32 : in;
  }
};

template <>
struct CostRule<OpKind::kRmsNorm> : FlopsOfClass {
  // HF LlamaRMSNorm: x32 = x.float(); var = x32.pow(2).mean(-1); n32 = x32 * rsqrt(var + eps);
  // out = weight * n32.to(x.dtype). pow and mul save x32; mul by weight saves n.
  static void Forward(ForwardRule& r) {
    const int64_t n = r.v.in_numel(0), rows = n / r.v.last_dim(0);
    const DType x_dtype = r.v.states[r.v.in(0)].dtype;
    const bool upcast = x_dtype != DType::kF32;
    if (upcast) {
      r.Internal("rms_norm fp32 upcast", StorageBytes(DType::kF32, n), r.SavedOr(r.v.grad(0)));
    } else {
      r.SaveIf(0, r.v.grad(0));
    }
    r.Internal("rms_norm x^2", StorageBytes(DType::kF32, n), Lifetime::kEphemeral);
    r.Internal("rms_norm rstd", StorageBytes(DType::kF32, rows), r.SavedOr(r.v.grad(0)));
    if (upcast)
      r.Internal("rms_norm normalized fp32", StorageBytes(DType::kF32, n), Lifetime::kTransient);
    r.Internal("rms_norm normalized", StorageBytes(x_dtype, n), r.SavedOr(r.v.grad(1)));
  }
  // The decomposed backward (mul, to, mul, rsqrt, mean, pow) runs in fp32: at its
  // height five fp32 tensors the size of x are live, after autograd freed the output's
  // gradient and (when the weight trains) the saved normalized x. The simulator frees
  // those two after the workspace, so it is 5 fp32 less their bytes: 3 fp32 for an fp32
  // x, 4 for a 16-bit one (measured on LlamaRMSNorm under PeakMeter and fake tensors,
  // Llama-3-70B bf16 FSDP at 2048 tokens).
  static void Backward(BackwardRule& r) {
    const int64_t n = r.v.in_numel(0);
    const int64_t normalized = StorageBytes(r.v.states[r.v.in(0)].dtype, n);
    const int64_t out_grad = StorageBytes(r.v.states[r.v.op.outputs[0]].dtype, n);
    r.cost.workspace_bytes = r.v.grad(1) ? 5 * r.f32_in() - out_grad - normalized : 3 * r.f32_in();
  }
};

template <>
struct CostRule<OpKind::kGemmaRmsNorm> : FlopsOfClass {
  // Gemma's RMSNorm (modeling_gemma2.py:49-63, modeling_gemma3.py:119-136):
  // xf = x.float(); n = xf * rsqrt(xf.pow(2).mean(-1) + eps); y = n * (1 + w.float());
  // y.type_as(x). pow and the product with rstd save xf; the product with (1 + w) saves
  // n only when w trains, and (1 + w) always.
  static void Forward(ForwardRule& r) {
    const int64_t n = r.v.in_numel(0), rows = n / r.v.last_dim(0), width = r.v.last_dim(0);
    const bool upcast = r.v.states[r.v.in(0)].dtype != DType::kF32;
    if (upcast) {
      r.Internal("gemma_rms_norm fp32 upcast", StorageBytes(DType::kF32, n),
                 r.SavedOr(r.v.grad(0)));
    } else {
      r.SaveIf(0, r.v.grad(0));
    }
    r.Internal("gemma_rms_norm x^2", StorageBytes(DType::kF32, n), Lifetime::kEphemeral);
    r.Internal("gemma_rms_norm rstd", StorageBytes(DType::kF32, rows), r.SavedOr(r.v.grad(0)));
    r.Internal("gemma_rms_norm normalized fp32", StorageBytes(DType::kF32, n),
               r.SavedOr(r.v.grad(1)));
    r.cost.internals.push_back({.label = "gemma_rms_norm 1 + weight",
                                .bytes = StorageBytes(DType::kF32, width),
                                .lifetime = r.SavedOr(r.v.grad(0)),
                                .per_sample = false});  // the weight's size
    if (upcast)
      r.Internal("gemma_rms_norm product fp32", StorageBytes(DType::kF32, n), Lifetime::kTransient);
  }
  static void Backward(BackwardRule& r) { r.cost.workspace_bytes = 3 * r.f32_in(); }
};

template <>
struct CostRule<OpKind::kAdd> : SavesNothing, FlopsOfClass {
  // The output gradient flows unchanged unless the input was broadcast or promoted.
  static void Backward(BackwardRule& r) {
    for (size_t i = 0; i < 2; ++i)
      r.PassThroughIf(i, r.v.in_matches_out(i) && r.same_dtype_as_out(i));
  }
};

template <>
struct CostRule<OpKind::kMul> : SavesOperandsForEachOther, FlopsOfClass {
  // Each input's gradient is dY times the other at the output's size and in its dtype
  // (mul_tensor_backward); a broadcast input's is then summed to its shape
  // (sum_to_size) and one of another dtype converted by the engine: both leave that
  // product as a temporary. (The MoE routing weights: [pairs, 1] against [pairs, h].)
  static void Backward(BackwardRule& r) {
    for (size_t i = 0; i < 2; ++i) {
      if (r.v.grad(i) && (!r.v.in_matches_out(i) || !r.same_dtype_as_out(i)))
        r.cost.workspace_bytes += r.v.out_bytes();
    }
  }
};
template <>
struct CostRule<OpKind::kScale> : SavesNothing, NewGradients, FlopsOfClass {};
template <>
struct CostRule<OpKind::kGelu> : SavesInput0, NewGradients, FlopsOfClass {};
template <>
struct CostRule<OpKind::kGeluTanh> : SavesInput0, NewGradients, FlopsOfClass {};
template <>
struct CostRule<OpKind::kSilu> : SavesInput0, NewGradients, FlopsOfClass {};
template <>
struct CostRule<OpKind::kTanh> : SavesOutput, NewGradients, FlopsOfClass {};
template <>
struct CostRule<OpKind::kContiguous> : SavesNothing, GradientPassesThrough, FlopsOfClass {};
template <>
struct CostRule<OpKind::kAddScalar> : SavesNothing, GradientPassesThrough, FlopsOfClass {};
template <>
struct CostRule<OpKind::kKvCacheCopy> : SavesNothing, GradientPassesThrough, FlopsOfClass {};
template <>
struct CostRule<OpKind::kRepeatKv> : SavesNothing, NewGradients, FlopsOfClass {
  // repeat_kv's expand + reshape of a single K/V head is a view, stride 0 over the query
  // heads, which the fused kernels read as it is (measured on the CPU: no copy); eager's
  // matmul copies it, and that copy is planned as this op's output.
  static void Forward(ForwardRule& r) {
    const auto& dims = r.v.graph.tensor(r.v.in(0)).shape.dims();
    r.cost.output_aliases_input =
        dims.at(1).value == 1 && r.v.op.attention_kernel != AttentionKernel::kEager;
  }
};
template <>
struct CostRule<OpKind::kLogSoftmax> : SavesOutput, NewGradients, FlopsOfClass {};
template <>
struct CostRule<OpKind::kRopeTables> : SavesNothing, NewGradients, FlopsOfClass {};

template <>
struct CostRule<OpKind::kCastLike> : FlopsOfClass {
  static void Forward(ForwardRule& r) {
    r.cost.output_aliases_input = r.v.states[r.v.in(0)].dtype == r.v.states[r.v.in(1)].dtype;
  }
  static void Backward(BackwardRule& r) {
    r.cost.input_grads[1] = GradFlow::kNone;
    r.PassThroughIf(0, r.v.states[r.v.in(0)].dtype == r.v.states[r.v.in(1)].dtype);
  }
};

template <>
struct CostRule<OpKind::kCube> : SavesInput0, FlopsOfClass {
  // PowBackward0: grad * 3 * x^2 as pow, mul, mul.
  static void Backward(BackwardRule& r) {
    r.cost.workspace_bytes = 2 * r.v.states.Bytes(r.v.graph, r.v.in(0), r.v.env);
  }
};

template <>
struct CostRule<OpKind::kDropout> : NewGradients, FlopsOfClass {
  static void Forward(ForwardRule& r) {
    // The mask is saved by the multiply that applies it.
    const DType mask =
        r.v.states.target().dropout_bool_mask ? DType::kBool : r.v.states[r.v.in(0)].dtype;
    r.Internal("dropout mask", StorageBytes(mask, r.v.in_numel(0)), r.SavedOr(true));
  }
};

template <>
struct CostRule<OpKind::kRope> : FlopsOfClass {
  static void Forward(ForwardRule& r) {
    // q * cos + rotate_half(q) * sin: two full-size products live with the output.
    r.SaveIf(1, r.v.grad(0));
    r.SaveIf(2, r.v.grad(0));
    r.cost.workspace_bytes = 2 * r.v.out_bytes();
  }
  static void Backward(BackwardRule& r) {
    r.cost.input_grads[1] = r.cost.input_grads[2] = GradFlow::kNone;
    r.cost.workspace_bytes = 2 * r.v.states.Bytes(r.v.graph, r.v.in(0), r.v.env);
  }
};

template <>
struct CostRule<OpKind::kCausalMask> : NewGradients, FlopsOfClass {
  static void Forward(ForwardRule& r) {
    // transformers' mask functions: a bool [s, s] pattern, then where() into the mask.
    r.cost.internals.push_back(
        {.label = "causal pattern",
         .bytes = StorageBytes(DType::kBool, r.v.env.seq_len * r.v.env.seq_len),
         .lifetime = Lifetime::kTransient,
         .per_sample = false});
  }
};

template <>
struct CostRule<OpKind::kWindowMask> : NewGradients, FlopsOfClass {
  // masking_utils.py's sdpa_mask without vmap (sdpa_mask, and_masks,
  // sliding_window_causal_mask_function): `ones(()) & (kv > q - window)`, then
  // `& (kv <= q)`, each a bool [1, 1, s, s] over int64 position aranges. At the second
  // `&` the first result and the causal comparison are live beside the mask.
  // Packed samples (create_causal_mask with packed position_ids): the same function (or
  // causal_mask_function) over the gathered position_ids, then `& (psm[q] == psm[kv])`,
  // again three bool [s, s] at the height, beside the int64 [b, s] sequence ids
  // (find_packed_sequence_indices) that live until the mask is made.
  static void Forward(ForwardRule& r) {
    if (r.v.op.packed_samples)
      r.Internal("packed sequence ids", StorageBytes(DType::kI64, r.v.env.seq_len),
                 Lifetime::kTransient);
    const int64_t s = r.v.env.seq_len;
    for (const char* label : {"window mask: first AND", "window mask: causal comparison"})
      r.cost.internals.push_back({.label = label,
                                  .bytes = StorageBytes(DType::kBool, s * s),
                                  .lifetime = Lifetime::kTransient,
                                  .per_sample = false});
    r.cost.internals.push_back({.label = "window mask: q and kv position aranges",
                                .bytes = 2 * StorageBytes(DType::kI64, s),
                                .lifetime = Lifetime::kTransient,
                                .per_sample = false});
  }
};

template <>
struct CostRule<OpKind::kView> : FlopsOfClass {
  static void Forward(ForwardRule& r) { r.cost.output_aliases_input = true; }
  // Reshapes hand the gradient through; splits and selects build a full-size one.
  static void Backward(BackwardRule& r) {
    r.PassThroughIf(0, r.v.op.outputs.size() == 1 && r.v.in_matches_out(0));
  }
};

template <>
struct CostRule<OpKind::kMergeHeads> : FlopsOfClass {
  // SDPA's flash kernels return [b, heads, s, d] as a transpose of a [b, s, heads, d]
  // buffer, so transpose(1, 2).contiguous() is a view; eager's bmm output is copied.
  static void Forward(ForwardRule& r) { r.cost.output_aliases_input = FromHeadsLastKernel(r.v); }
  static void Backward(BackwardRule& r) { r.PassThroughIf(0, FromHeadsLastKernel(r.v)); }
  // The CPU flash, cuDNN and flash kernels allocate their output with q's layout
  // (empty_like(q) in aten/src/ATen/native/cpu/FlashAttentionKernel.cpp and flash_api's
  // mha_fwd; cuDNN matches q's strides), so a contiguous q gives a contiguous
  // [b, heads, s, d] output that merging copies; the memory-efficient kernel always
  // writes [b, s, heads, d].
  static bool FromHeadsLastKernel(const OpView& v) {
    if (!v.produced_by(0, OpKind::kSdpa)) return false;
    const OpNode& sdpa = v.graph.op(v.graph.tensor(v.in(0)).producer);
    const AttentionKernel k = sdpa.attention_kernel;
    if (sdpa.contiguous_query && (k == AttentionKernel::kCpuFlash || k == AttentionKernel::kCudnn ||
                                  k == AttentionKernel::kFlash))
      return false;
    return ReturnsHeadsLastLayout(k);
  }
};

template <>
struct CostRule<OpKind::kAttnScores> : NewGradients, AttentionProductFlops {
  // matmul(q, k^T) * scaling [+ mask]: out of place, so the unscaled product is live
  // beside the result; adding the mask saves nothing.
  static void Forward(ForwardRule& r) {
    SavesOperandsForEachOther::Forward(r);
    r.cost.workspace_bytes = r.v.out_bytes();
  }
};

template <>
struct CostRule<OpKind::kAttnContext>
    : SavesOperandsForEachOther, NewGradients, AttentionProductFlops {};

template <>
struct CostRule<OpKind::kSoftmax> : SavesOutput, FlopsOfClass {
  // softmax(x, dtype=float32) of a 16-bit x on the CPU converts x first; backward
  // computes the fp32 gradient, then converts it back.
  static bool converts_input(const OpView& v) {
    return v.op.upcast && v.states[v.in(0)].dtype != DType::kF32 &&
           !v.states.target().cuda_autocast;
  }
  static void Forward(ForwardRule& r) {
    SavesOutput::Forward(r);
    if (converts_input(r.v))
      r.Internal("softmax fp32 input", StorageBytes(DType::kF32, r.v.in_numel(0)),
                 Lifetime::kTransient);
  }
  static void Backward(BackwardRule& r) {
    if (converts_input(r.v)) r.cost.workspace_bytes = r.f32_in();
  }
};

// scaled_dot_product_attention (or flash-attn) by the kernel that runs it
// (models/attention_kernel_choice.cc); docs/memory-model.md cites each rule's source.

// _scaled_dot_product_attention_math (aten/src/ATen/native/transformers/attention.cpp), a
// composite: autograd records its ops. 16-bit inputs are upcast to fp32; q and k^T are
// each scaled by sqrt(scale) (MulBackward saves nothing, the bmm saves both products'
// operands); is_causal builds a bool [s, s] tril and converts it to an fp32 additive mask;
// grouped K/V are repeat_interleave'd to every query head; the scores get the mask in
// place; _safe_softmax saves only its result (its softmax, eq(-inf) and all() temporaries
// live until it returns). Every C++ local lives until the function returns.
void MathAttentionForward(ForwardRule& r, const SdpaShape& a) {
  const int64_t q_f32 = StorageBytes(DType::kF32, a.q_numel());
  const int64_t kv_f32 = StorageBytes(DType::kF32, a.b * a.kv_heads * a.s * a.d);
  const bool upcast = a.dtype != DType::kF32;
  if (upcast) {
    r.Internal("math sdpa q fp32", q_f32, Lifetime::kTransient);
    r.Internal("math sdpa k fp32", kv_f32, Lifetime::kTransient);
    r.Internal("math sdpa v fp32", kv_f32, r.SavedOr(!a.grouped()));
  } else {
    r.SaveIf(2, !a.grouped());
  }
  r.Internal("math sdpa q * sqrt(scale)", q_f32, r.SavedOr(true));
  if (r.v.op.causal) {
    const int64_t ss = a.s * a.s;
    for (auto [label, bytes] : {std::pair{"causal ones", StorageBytes(DType::kBool, ss)},
                                {"causal tril", StorageBytes(DType::kBool, ss)},
                                {"causal logical_not", StorageBytes(DType::kBool, ss)},
                                {"causal additive mask", StorageBytes(DType::kF32, ss)}})
      r.cost.internals.push_back(
          {.label = label, .bytes = bytes, .lifetime = Lifetime::kTransient, .per_sample = false});
  }
  if (a.grouped()) {
    r.Internal("math sdpa repeat_interleave k", q_f32, Lifetime::kTransient);
    r.Internal("math sdpa repeat_interleave v", q_f32, r.SavedOr(true));
  }
  r.Internal("math sdpa k^T * sqrt(scale)", q_f32, r.SavedOr(true));
  const int64_t scores = StorageBytes(DType::kF32, a.scores_numel());
  r.Internal("math sdpa scores", scores, Lifetime::kTransient);
  r.Internal("_safe_softmax softmax", scores, Lifetime::kTransient);
  r.Internal("_safe_softmax eq(-inf)", StorageBytes(DType::kBool, a.scores_numel()),
             Lifetime::kTransient);
  r.Internal("_safe_softmax all()", StorageBytes(DType::kBool, a.b * a.heads * a.s),
             Lifetime::kTransient);
  r.Internal("_safe_softmax result", scores, r.SavedOr(true));
  // The fp32 product before .to(origin_dtype).
  if (upcast) r.Internal("math sdpa fp32 output", q_f32, Lifetime::kTransient);
}

template <>
struct CostRule<OpKind::kSdpa> : AttentionProductFlops {
  static void Forward(ForwardRule& r) {
    const SdpaShape a = SdpaShape::Of(r.v);
    const AttentionKernel kernel = r.v.op.attention_kernel;
    if (kernel == AttentionKernel::kMath) {
      if (masked(r.v)) AdditiveMask(r, a, false);
      return MathAttentionForward(r, a);
    }
    // The fused kernels save q, k, v (grouped K/V as passed), their output and an fp32
    // logsumexp: [b, h, s] (flash, cuDNN's [b, h, s, 1], the CPU's, flash-attn's
    // softmax_lse); the memory-efficient kernel pads s to a multiple of 32 (kAlignLSE).
    for (size_t i = 0; i < 3; ++i) r.SaveIf(i, true);
    r.SaveOutputIf(0, true);
    const int64_t lse_s = kernel == AttentionKernel::kMemEfficient ? RoundUp(a.s, 32) : a.s;
    r.Internal("sdpa logsumexp", StorageBytes(DType::kF32, a.b * a.heads * lse_s), r.SavedOr(true));
    PhiloxState(r);
    if (masked(r.v)) AdditiveMask(r, a, true);
  }
  // The dropout RNG state the CUDA kernels return and autograd saves for their backward,
  // made on the device even without dropout: PyTorch's flash (flash_api.cpp,
  // prepare_philox_arguments), memory-efficient (attention.cu, _efficient_attention_forward)
  // and cuDNN (_scaled_dot_product_cudnn_attention_cuda: at::zeros({1}, kLong)) kernels
  // each make a seed and an offset of 8 bytes; flash-attn's mha_fwd one rng_state of two
  // int64. A 512-byte block each on CUDA.
  static void PhiloxState(ForwardRule& r) {
    switch (r.v.op.attention_kernel) {
      case AttentionKernel::kFlash:
      case AttentionKernel::kMemEfficient:
      case AttentionKernel::kCudnn:
        r.FixedInternal("sdpa philox seed", 8, r.SavedOr(true));
        r.FixedInternal("sdpa philox offset", 8, r.SavedOr(true));
        break;
      case AttentionKernel::kFlashAttn2:
        r.FixedInternal("flash-attn rng_state", 16, r.SavedOr(true));
        break;
      case AttentionKernel::kCpuFlash:  // returns its output and logsumexp only
      case AttentionKernel::kMath:
      case AttentionKernel::kEager:
        break;
    }
  }
  // A bool attn_mask (transformers' sliding window) as input 3.
  static bool masked(const OpView& v) { return v.op.inputs.size() > 3; }
  // scaled_dot_product_attention converts a bool mask first (attention.cpp
  // convert_boolean_attn_mask: where(mask, 0, -inf)) into a [b, 1, s, s] tensor of q's
  // dtype, the mask's broadcast batch made real. The fused kernels save it for backward;
  // the memory-efficient kernel's preprocess_mask pads the last dimension to a multiple of
  // 8 first when s is not one (pad_bias, then a sliced view). The math composite adds it
  // in place: a local until the call returns.
  static void AdditiveMask(ForwardRule& r, const SdpaShape& a, bool fused) {
    const int64_t where = StorageBytes(a.dtype, a.b * a.s * a.s);
    if (!fused) return r.Internal("sdpa additive mask", where, Lifetime::kTransient);
    const bool padded = r.v.op.attention_kernel == AttentionKernel::kMemEfficient && a.s % 8 != 0;
    r.Internal("sdpa additive mask", where, r.SavedOr(!padded));
    if (padded)
      r.Internal("sdpa additive mask padded to 8",
                 StorageBytes(a.dtype, a.b * a.s * RoundUp(a.s, 8)), r.SavedOr(true));
  }
  static void Backward(BackwardRule& r) {
    const SdpaShape a = SdpaShape::Of(r.v);
    const int64_t q_f32 = StorageBytes(DType::kF32, a.q_numel());
    switch (r.v.op.attention_kernel) {
      case AttentionKernel::kFlash:
      case AttentionKernel::kFlashAttn2:
      case AttentionKernel::kMemEfficient:
      case AttentionKernel::kCudnn:
        r.cost.workspace_bytes = FusedAttentionBackwardScratch(r.v.op.attention_kernel, a);
        break;
      case AttentionKernel::kCpuFlash:
        // Measured: an fp32 buffer the size of k.
        r.cost.workspace_bytes = StorageBytes(DType::kF32, r.v.in_numel(1));
        break;
      case AttentionKernel::kMath: {
        // Autograd of the composite: the gradients of the softmax result and of the
        // scores ([b, h, s, s] fp32 each) meet, then q's and k's fp32 gradients.
        const int64_t scores = StorageBytes(DType::kF32, a.scores_numel());
        r.cost.workspace_bytes = 2 * scores + 2 * q_f32;
        break;
      }
      case AttentionKernel::kEager:
        throw std::logic_error("eager attention is not an sdpa op");
    }
  }
};

template <>
struct CostRule<OpKind::kCastF32> : FlopsOfClass {
  static void Forward(ForwardRule& r) {
    r.cost.output_aliases_input = r.v.states[r.v.in(0)].dtype == DType::kF32;
  }
  static void Backward(BackwardRule& r) {
    r.PassThroughIf(0, r.v.states[r.v.in(0)].dtype == DType::kF32);
  }
};

template <>
struct CostRule<OpKind::kNllLoss> : FlopsOfClass {
  // Saves the targets and nll_loss_forward's second output, the fp32 total_weight
  // scalar (derivatives.yaml: nll_loss_backward(..., total_weight)).
  static void Forward(ForwardRule& r) {
    r.SaveIf(1, true);
    r.cost.internals.push_back({.label = "nll_loss total_weight",
                                .bytes = StorageBytes(DType::kF32, 1),
                                .lifetime = r.SavedOr(true),
                                .per_sample = false});
  }
  static void Backward(BackwardRule& r) { r.cost.input_grads[1] = GradFlow::kNone; }
};

// TRL's fused LM head (chunked_loss.h): (hidden [b, s, h], lm_head.weight [vocab, h],
// labels) -> the loss. ctx.save_for_backward keeps the hidden state (a view of it, or its
// flattened copy: the same bytes); the tiles are sized where the simulator runs them.
template <>
struct CostRule<OpKind::kChunkedNll> {
  static ChunkedLossCall CallOf(const OpView& v) {
    const PrecisionRegime& regime = v.states.regime();
    const DType hidden_dtype = v.states[v.in(0)].dtype;
    return {.seq_len = v.env.seq_len,
            .hidden = v.last_dim(0),
            .vocab = v.graph.tensor(v.in(1)).shape.dims().at(0).value,
            .vocab_tile = v.op.vocab_tile,
            .hidden_dtype = hidden_dtype,
            .weight_dtype = v.states[v.in(1)].dtype,
            // torch.get_autocast_dtype under autocast, else hidden.dtype
            .compute_dtype = regime.autocast ? regime.compute_dtype : hidden_dtype,
            .softcap = v.op.logit_softcap > 0,
            .hidden_grad = v.grad(0),
            .weight_grad = v.grad(1),
            .triton = v.states.target().cuda_device,
            .cpu_bf16 = v.states.target().cpu_bf16_matmul,
            .cpu_threads = v.cpu_threads()};
  }
  static void Forward(ForwardRule& r) {
    r.SaveIf(0, true);
    r.cost.chunked_loss = CallOf(r.v);
    // In proportion to the micro-batch: the bytes at micro-batch 1.
    r.Internal("chunked loss targets, log Z, entropy, masks",
               r.cost.chunked_loss.ForwardSavedBytes(1), r.SavedOr(true));
  }
  static void Backward(BackwardRule& r) {
    r.cost.input_grads[2] = GradFlow::kNone;
    r.cost.chunked_loss = CallOf(r.v);
  }
  // The forward's tile products, the backward's again, and one more per gradient.
  static OpFlops Flops(const OpView& v) {
    const double product = 2.0 * static_cast<double>(v.env.micro_batch * (v.env.seq_len - 1)) *
                           static_cast<double>(v.last_dim(0)) *
                           static_cast<double>(v.graph.tensor(v.in(1)).shape.dims().at(0).value);
    return {product, product * (1 + (v.grad(0) ? 1 : 0) + (v.grad(1) ? 1 : 0))};
  }
};

}  // namespace cost_rules

using cost_rules::BackwardRule;
using cost_rules::CostRule;
using cost_rules::ForwardRule;
using cost_rules::OpView;

ForwardCost CostForward(const OpGraph& graph, const OpNode& op, const TensorStates& states,
                        const ShapeEnv& env, bool grad_mode) {
  const OpView v{graph, op, states, env};
  ForwardCost cost;
  cost.saves_input.assign(op.inputs.size(), false);
  ForwardRule rule{v, cost, grad_mode && v.out_grad()};
  VisitOpKind(op.kind, [&]<OpKind K>() { CostRule<K>::Forward(rule); });
  cost_rules::AddAutocastCasts(v, cost);
  cost_rules::AddCpuBf16ForwardScratch(v, cost);
  return cost;
}

BackwardCost CostBackward(const OpGraph& graph, const OpNode& op, const TensorStates& states,
                          const ShapeEnv& env) {
  const OpView v{graph, op, states, env};
  BackwardCost cost;
  cost.input_grads.assign(op.inputs.size(), GradFlow::kNone);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (v.grad(i)) cost.input_grads[i] = GradFlow::kNew;
  }
  BackwardRule rule{v, cost};
  VisitOpKind(op.kind, [&]<OpKind K>() { CostRule<K>::Backward(rule); });
  cost_rules::AddCpuBf16BackwardScratch(v, cost);
  return cost;
}

OpFlops CostFlops(const OpGraph& graph, const OpNode& op, const TensorStates& states,
                  const ShapeEnv& env) {
  const OpView v{graph, op, states, env};
  return VisitOpKind(op.kind, [&]<OpKind K>() { return CostRule<K>::Flops(v); });
}

}  // namespace headroom
