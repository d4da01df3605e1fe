#include "planner/simulate/op_cost.h"

#include <algorithm>
#include <stdexcept>

namespace headroom {
namespace {

using Lifetime = InternalBuffer::Lifetime;

struct OpView {
  const OpGraph& graph;
  const OpNode& op;
  const TensorStates& states;
  const ShapeEnv& env;

  TensorId in(size_t i) const { return op.inputs.at(i); }
  bool grad(size_t i) const { return states[in(i)].requires_grad; }
  int64_t numel(TensorId t) const { return graph.tensor(t).shape.Numel(env); }
  int64_t in_numel(size_t i) const { return numel(in(i)); }
  int64_t out_numel() const { return numel(op.outputs.at(0)); }
  // Input i has the output's element count at every (b, s) (not broadcast, not split).
  bool in_matches_out(size_t i) const {
    return graph.tensor(in(i)).shape.SameNumel(graph.tensor(op.outputs.at(0)).shape);
  }
  int64_t out_bytes() const { return states.Bytes(graph, op.outputs.at(0), env); }
  bool out_grad() const { return !op.outputs.empty() && states[op.outputs[0]].requires_grad; }
  bool quantized_weight() const {
    return op.kind == OpKind::kLinear && states[in(1)].dtype == DType::kNF4;
  }
  int64_t last_dim(size_t i) const { return graph.tensor(in(i)).shape.dims().back().value; }
  bool produced_by(size_t i, OpKind kind) const {
    const OpId p = graph.tensor(in(i)).producer;
    return p.valid() && graph.op(p).kind == kind;
  }
  // The CPU kernel a bf16 matrix multiply runs, if this op is one.
  std::optional<CpuBf16> cpu_bf16_matmul() const {
    const bool matmul = op.kind == OpKind::kLinear || op.kind == OpKind::kAttnScores ||
                        op.kind == OpKind::kAttnContext;
    if (!matmul || states[op.outputs.at(0)].dtype != DType::kBF16) return std::nullopt;
    return states.target().cpu_bf16_matmul;
  }
};

// Autocast copies of inputs whose dtype changes; saved when the op saves that input.
void AddAutocastCasts(const OpView& v, ForwardCost& cost) {
  for (size_t i = 0; i < v.op.inputs.size(); ++i) {
    if (!v.states.IsCast(v.op, i)) continue;
    if (v.quantized_weight() && i == 1) continue;  // NF4 is dequantized, not cast
    const DType used = v.states.UsedDType(v.op, i);
    cost.internals.push_back(
        {.label = "autocast copy",
         .bytes = StorageBytes(used, v.in_numel(i)),
         .lifetime = cost.saves_input[i] ? Lifetime::kSaved : Lifetime::kTransient,
         .cast_of_input = static_cast<int>(i),
         .per_sample = v.graph.tensor(v.in(i)).shape.ScalesWithBatch()});
  }
}

}  // namespace

ForwardCost CostForward(const OpGraph& graph, const OpNode& op, const TensorStates& states,
                        const ShapeEnv& env, bool grad_mode) {
  const OpView v{graph, op, states, env};
  ForwardCost cost;
  cost.saves_input.assign(op.inputs.size(), false);
  // Autograd saves only what the gradients of inputs that require grad need.
  const bool record = grad_mode && v.out_grad();
  auto save_if = [&](size_t i, bool cond) { cost.saves_input[i] = record && cond; };
  auto saved_or = [&](bool cond) {
    return record && cond ? Lifetime::kSaved : Lifetime::kTransient;
  };

  switch (op.kind) {
    case OpKind::kEmbedding:
      save_if(0, v.grad(1));  // indices, for the weight gradient
      break;
    case OpKind::kLinear:
      if (v.quantized_weight()) {
        // bitsandbytes dequantizes the NF4 weight into a compute-dtype buffer per call
        // and saves only the quantized state.
        cost.internals.push_back(
            {.label = "NF4 dequantized weight",
             .bytes = StorageBytes(states.regime().compute_dtype, v.in_numel(1)),
             .lifetime = Lifetime::kTransient,
             .weight_copy = true,
             .per_sample = false});
        break;
      }
      save_if(0, v.grad(1));  // x for the weight gradient
      save_if(1, v.grad(0));  // weight for the input gradient
      break;
    case OpKind::kLayerNorm: {
      save_if(0, true);
      const int64_t rows = v.in_numel(0) / v.last_dim(0);
      cost.internals.push_back(
          {"layer_norm mean", StorageBytes(DType::kF32, rows), saved_or(true)});
      cost.internals.push_back(
          {"layer_norm rstd", StorageBytes(DType::kF32, rows), saved_or(true)});
      break;
    }
    case OpKind::kRmsNorm: {
      // HF LlamaRMSNorm: x32 = x.float(); var = x32.pow(2).mean(-1); n32 = x32 * rsqrt(var + eps);
      // out = weight * n32.to(x.dtype). pow and mul save x32; mul by weight saves n.
      const int64_t n = v.in_numel(0), rows = n / v.last_dim(0);
      const DType x_dtype = states[v.in(0)].dtype;
      const bool upcast = x_dtype != DType::kF32;
      if (upcast) {
        cost.internals.push_back(
            {"rms_norm fp32 upcast", StorageBytes(DType::kF32, n), saved_or(v.grad(0))});
      } else {
        save_if(0, v.grad(0));
      }
      cost.internals.push_back(
          {"rms_norm x^2", StorageBytes(DType::kF32, n), Lifetime::kEphemeral});
      cost.internals.push_back(
          {"rms_norm rstd", StorageBytes(DType::kF32, rows), saved_or(v.grad(0))});
      if (upcast) {
        cost.internals.push_back(
            {"rms_norm normalized fp32", StorageBytes(DType::kF32, n), Lifetime::kTransient});
      }
      cost.internals.push_back(
          {"rms_norm normalized", StorageBytes(x_dtype, n), saved_or(v.grad(1))});
      break;
    }
    case OpKind::kMul:
      save_if(0, v.grad(1));
      save_if(1, v.grad(0));
      break;
    case OpKind::kGelu:
    case OpKind::kGeluTanh:
    case OpKind::kSilu:
    case OpKind::kCube:
      save_if(0, true);
      break;
    case OpKind::kTanh:
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
      cost.saves_output = record;
      if (op.kind == OpKind::kSoftmax && op.upcast && states[v.in(0)].dtype != DType::kF32 &&
          !states.target().cuda_autocast) {
        cost.internals.push_back(
            {"softmax fp32 input", StorageBytes(DType::kF32, v.in_numel(0)), Lifetime::kTransient});
      }
      break;
    case OpKind::kDropout: {
      // The mask is saved by the multiply that applies it.
      const DType mask = states.target().dropout_bool_mask ? DType::kBool : states[v.in(0)].dtype;
      cost.internals.push_back({"dropout mask", StorageBytes(mask, v.in_numel(0)), saved_or(true)});
      break;
    }
    case OpKind::kRope:
      // q * cos + rotate_half(q) * sin: two full-size products live with the output.
      save_if(1, v.grad(0));
      save_if(2, v.grad(0));
      cost.workspace_bytes = 2 * v.out_bytes();
      break;
    case OpKind::kView:
      cost.output_aliases_input = true;
      break;
    case OpKind::kCastF32:
      cost.output_aliases_input = states[v.in(0)].dtype == DType::kF32;
      break;
    case OpKind::kCastLike:
      cost.output_aliases_input = states[v.in(0)].dtype == states[v.in(1)].dtype;
      break;
    case OpKind::kAttnScores:
      // matmul(q, k^T) * scaling [+ mask]: out of place, so the unscaled product is live
      // beside the result; adding the mask saves nothing.
      save_if(0, v.grad(1));
      save_if(1, v.grad(0));
      cost.workspace_bytes = v.out_bytes();
      break;
    case OpKind::kAttnContext:
      save_if(0, v.grad(1));
      save_if(1, v.grad(0));
      break;
    case OpKind::kSdpa: {
      for (size_t i = 0; i < 3; ++i) save_if(i, true);
      cost.saves_output = record;
      const int64_t rows = v.in_numel(0) / v.last_dim(0);  // b * heads * s
      cost.internals.push_back({"sdpa logsumexp", StorageBytes(DType::kF32, rows), saved_or(true)});
      break;
    }
    case OpKind::kNllLoss:
      save_if(1, true);  // the targets
      break;
    case OpKind::kCausalMask:
      // transformers' mask functions: a bool [s, s] pattern, then where() into the mask.
      cost.internals.push_back({.label = "causal pattern",
                                .bytes = StorageBytes(DType::kBool, env.seq_len * env.seq_len),
                                .lifetime = Lifetime::kTransient,
                                .per_sample = false});
      break;
    case OpKind::kAdd:
    case OpKind::kAddScalar:
    case OpKind::kScale:
    case OpKind::kKvCacheCopy:
    case OpKind::kContiguous:
    case OpKind::kRepeatKv:
    case OpKind::kRopeTables:
      break;
    case OpKind::kMergeHeads:
      // SDPA's flash kernels return [b, heads, s, d] as a transpose of a [b, s, heads, d]
      // buffer, so transpose(1, 2).contiguous() is a view; eager's bmm output is copied.
      cost.output_aliases_input = v.produced_by(0, OpKind::kSdpa);
      break;
  }
  AddAutocastCasts(v, cost);
  if (v.cpu_bf16_matmul() == CpuBf16::kAvx512Bf16) {
    // oneDNN's AVX512-BF16 brgemm scratchpad, measured: an fp32 block of up to 256 rows
    // x 64 columns (scaled with the micro-batch here) and a bf16 panel of 64 rows x up
    // to 512 of the inner dimension, plus 1 KiB.
    const int64_t rows = v.out_numel() / v.graph.tensor(op.outputs[0]).shape.dims().back().value;
    cost.workspace_bytes += std::min<int64_t>(rows, 256) * 64 * 4;
    cost.internals.push_back({.label = "oneDNN scratchpad",
                              .bytes = 64 * std::min<int64_t>(v.last_dim(0), 512) * 2 + 1024,
                              .lifetime = Lifetime::kTransient,
                              .per_sample = false});
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
  const int64_t f32_in = StorageBytes(DType::kF32, op.inputs.empty() ? 0 : v.in_numel(0));
  switch (op.kind) {
    case OpKind::kAdd:
      // The output gradient flows unchanged unless the input was broadcast or promoted.
      for (size_t i = 0; i < 2; ++i) {
        if (v.grad(i) && v.in_matches_out(i) &&
            states[v.in(i)].dtype == states[op.outputs[0]].dtype) {
          cost.input_grads[i] = GradFlow::kPassThrough;
        }
      }
      break;
    case OpKind::kAddScalar:
    case OpKind::kKvCacheCopy:
    case OpKind::kContiguous:
      // x + c, a copy, and cat([empty, x]) whose backward narrows the gradient: the
      // output's gradient is handed through.
      if (v.grad(0) && states[v.in(0)].dtype == states[op.outputs[0]].dtype)
        cost.input_grads[0] = GradFlow::kPassThrough;
      break;
    case OpKind::kCube:
      // PowBackward0: grad * 3 * x^2 as pow, mul, mul.
      cost.workspace_bytes = 2 * states.Bytes(graph, v.in(0), env);
      break;
    case OpKind::kView:
      // Reshapes hand the gradient through; splits and selects build a full-size one.
      if (v.grad(0) && op.outputs.size() == 1 && v.in_matches_out(0)) {
        cost.input_grads[0] = GradFlow::kPassThrough;
      }
      break;
    case OpKind::kCastF32:
      if (v.grad(0) && states[v.in(0)].dtype == DType::kF32)
        cost.input_grads[0] = GradFlow::kPassThrough;
      break;
    case OpKind::kCastLike:
      cost.input_grads[1] = GradFlow::kNone;
      if (v.grad(0) && states[v.in(0)].dtype == states[v.in(1)].dtype)
        cost.input_grads[0] = GradFlow::kPassThrough;
      break;
    case OpKind::kSoftmax:
      // softmax(x, dtype=float32) of a 16-bit x on the CPU converts x first; backward
      // computes the fp32 gradient, then converts it back.
      if (op.upcast && states[v.in(0)].dtype != DType::kF32 && !states.target().cuda_autocast)
        cost.workspace_bytes = f32_in;
      break;
    case OpKind::kEmbedding:
      cost.input_grads[0] = GradFlow::kNone;
      break;
    case OpKind::kNllLoss:
      cost.input_grads[1] = GradFlow::kNone;
      break;
    case OpKind::kLinear:
      if (v.quantized_weight()) {
        cost.input_grads[1] = GradFlow::kNone;
        if (v.grad(0))
          cost.workspace_bytes = StorageBytes(states.regime().compute_dtype, v.in_numel(1));
        cost.workspace_per_sample = false;
      }
      break;
    case OpKind::kRmsNorm:
      // The decomposed backward (mul, to, mul, rsqrt, mean, pow) runs in fp32.
      cost.workspace_bytes = 3 * f32_in;
      break;
    case OpKind::kRope:
      cost.input_grads[1] = cost.input_grads[2] = GradFlow::kNone;
      cost.workspace_bytes = 2 * states.Bytes(graph, v.in(0), env);
      break;
    case OpKind::kSdpa:
      // The flash backward's fp32 scratch: the size of q on CUDA; of k on the CPU
      // (measured; the same unless K/V are grouped).
      cost.workspace_bytes =
          states.target().cuda_autocast ? f32_in : StorageBytes(DType::kF32, v.in_numel(1));
      break;
    case OpKind::kMergeHeads:
      if (v.grad(0) && v.produced_by(0, OpKind::kSdpa))
        cost.input_grads[0] = GradFlow::kPassThrough;
      break;
    default:
      break;
  }
  if (v.cpu_bf16_matmul() == CpuBf16::kAvx512Bf16 && cost.input_grads[0] == GradFlow::kNew) {
    // The input gradient's product dY @ W has the forward's scratchpad shape with the
    // output width as its inner dimension.
    const int64_t out_width = v.graph.tensor(op.outputs[0]).shape.dims().back().value;
    const int64_t rows = v.out_numel() / out_width;
    cost.input_grad_scratch_bytes +=
        std::min<int64_t>(rows, 256) * 64 * 4 + 64 * std::min<int64_t>(out_width, 512) * 2 + 1024;
  }
  if (v.cpu_bf16_matmul() == CpuBf16::kEmulated && op.kind == OpKind::kLinear) {
    // Each gradient product has its fp32 scratch: the input's scales with the
    // micro-batch, the weight's does not.
    if (cost.input_grads[0] == GradFlow::kNew)
      cost.input_grad_scratch_bytes += 2 * StorageBytes(DType::kBF16, v.in_numel(0));
    if (cost.input_grads[1] == GradFlow::kNew)
      cost.weight_grad_scratch_bytes = StorageBytes(DType::kF32, v.in_numel(1));
  }
  return cost;
}

OpFlops CostFlops(const OpGraph& graph, const OpNode& op, const TensorStates& states,
                  const ShapeEnv& env) {
  const OpView v{graph, op, states, env};
  OpFlops f;
  switch (op.kind) {
    case OpKind::kLinear: {
      const double mm =
          2.0 * static_cast<double>(v.out_numel()) * static_cast<double>(v.last_dim(0));
      f.forward = mm;
      f.backward = (v.grad(0) ? mm : 0.0) + (v.grad(1) ? mm : 0.0);
      break;
    }
    case OpKind::kAttnScores:
    case OpKind::kSdpa:
    case OpKind::kAttnContext: {
      // q @ k^T and p @ v each cost 2 * (b * heads * s * d) * s.
      const TensorId bhsd = op.kind == OpKind::kAttnContext ? op.outputs[0] : v.in(0);
      const double one =
          2.0 * static_cast<double>(v.numel(bhsd)) * static_cast<double>(env.seq_len);
      f.forward = op.kind == OpKind::kSdpa ? 2 * one : one;
      f.backward = 2 * f.forward;
      break;
    }
    case OpKind::kView:
    case OpKind::kRopeTables:
    case OpKind::kCausalMask:
      break;
    default:
      // Elementwise and normalization ops: a few FLOPs per element; memory-bound.
      f.forward = 5.0 * static_cast<double>(op.outputs.empty() ? 0 : v.out_numel());
      f.backward = v.out_grad() ? 2 * f.forward : 0.0;
      break;
  }
  return f;
}

}  // namespace headroom
