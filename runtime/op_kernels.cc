#include "runtime/op_kernels.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "runtime/fused_dropout.h"

namespace headroom {
namespace {

using Outputs = std::vector<at::Tensor>;

// transformers' rotary frequencies: 1 / theta^(2i/d), with Llama 3.1's scaling
// (_compute_llama3_parameters): long wavelengths divided by the factor, short ones kept,
// and a smooth blend between them.
at::Tensor RopeInverseFrequencies(const RopeParams& rope, int64_t d, at::TensorOptions f32) {
  at::Tensor inv_freq = 1.0 / at::pow(rope.theta, at::arange(0, d, 2, f32) / d);
  if (rope.linear_factor > 0) return inv_freq / rope.linear_factor;  // positions / factor
  if (rope.llama3_factor <= 0) return inv_freq;
  const double old_len = static_cast<double>(rope.original_max_positions);
  const double low_wavelen = old_len / rope.low_freq_factor;
  const double high_wavelen = old_len / rope.high_freq_factor;
  const at::Tensor wavelen = 2.0 * M_PI / inv_freq;
  at::Tensor scaled = at::where(wavelen > low_wavelen, inv_freq / rope.llama3_factor, inv_freq);
  const at::Tensor smooth =
      (old_len / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * scaled / rope.llama3_factor + smooth * scaled;
  const at::Tensor medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return at::where(medium, smoothed, scaled);
}

// One specialization per op kind with `static Outputs Run(const KernelCall&)`; a kind
// without one fails to compile in RunKernel.
template <OpKind K>
struct Kernel;

template <>
struct Kernel<OpKind::kEmbedding> {
  static Outputs Run(const KernelCall& c) { return {at::embedding(c.in[1], c.in[0])}; }
};
template <>
struct Kernel<OpKind::kLinear> {
  static Outputs Run(const KernelCall& c) {
    return {at::linear(c.in[0], c.in[1],
                       c.in.size() > 2 ? std::optional<at::Tensor>(c.in[2]) : std::nullopt)};
  }
};
template <>
struct Kernel<OpKind::kLayerNorm> {
  static Outputs Run(const KernelCall& c) {
    return {at::layer_norm(c.in[0], {c.in[0].size(-1)}, c.in[1], c.in[2], c.op.eps)};
  }
};
template <>
struct Kernel<OpKind::kRmsNorm> {
  // Hugging Face's LlamaRMSNorm, op for op.
  static Outputs Run(const KernelCall& c) {
    const at::Tensor& x = c.in[0];
    const at::Tensor x32 = x.to(at::kFloat);
    const at::Tensor rstd = at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + c.op.eps);
    return {c.in[1] * (x32 * rstd).to(x.scalar_type())};
  }
};
template <>
struct Kernel<OpKind::kGemmaRmsNorm> {
  // Gemma's RMSNorm, op for op: the (1 + weight) product in fp32, then cast to x's dtype.
  static Outputs Run(const KernelCall& c) {
    const at::Tensor& x = c.in[0];
    const at::Tensor x32 = x.to(at::kFloat);
    const at::Tensor n = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + c.op.eps);
    return {(n * (1.0 + c.in[1].to(at::kFloat))).to(x.scalar_type())};
  }
};
template <>
struct Kernel<OpKind::kAdd> {
  static Outputs Run(const KernelCall& c) { return {c.in[0] + c.in[1]}; }
};
template <>
struct Kernel<OpKind::kMul> {
  static Outputs Run(const KernelCall& c) { return {c.in[0] * c.in[1]}; }
};
template <>
struct Kernel<OpKind::kScale> {
  static Outputs Run(const KernelCall& c) { return {c.in[0] * c.op.scalar}; }
};
template <>
struct Kernel<OpKind::kAddScalar> {
  static Outputs Run(const KernelCall& c) { return {c.in[0] + c.op.scalar}; }
};
template <>
struct Kernel<OpKind::kCube> {
  static Outputs Run(const KernelCall& c) { return {at::pow(c.in[0], 3.0)}; }
};
template <>
struct Kernel<OpKind::kKvCacheCopy> {
  static Outputs Run(const KernelCall& c) {
    return {at::cat({at::empty({0}, c.in[0].options()), c.in[0]}, -2)};
  }
};
template <>
struct Kernel<OpKind::kGelu> {
  static Outputs Run(const KernelCall& c) { return {at::gelu(c.in[0])}; }
};
template <>
struct Kernel<OpKind::kGeluTanh> {
  static Outputs Run(const KernelCall& c) { return {at::gelu(c.in[0], "tanh")}; }
};
template <>
struct Kernel<OpKind::kSilu> {
  static Outputs Run(const KernelCall& c) { return {at::silu(c.in[0])}; }
};
template <>
struct Kernel<OpKind::kTanh> {
  static Outputs Run(const KernelCall& c) { return {at::tanh(c.in[0])}; }
};
template <>
struct Kernel<OpKind::kDropout> {
  static Outputs Run(const KernelCall& c) { return {FusedDropout(c.in[0], c.op.dropout_p)}; }
};
template <>
struct Kernel<OpKind::kRopeTables> {
  // cos and sin [1, s, head_dim] in the hidden states' dtype, broadcast over the batch.
  static Outputs Run(const KernelCall& c) {
    at::NoGradGuard no_grad;
    const std::vector<int64_t> sizes = c.out_sizes();
    const int64_t s = sizes[1], d = sizes[2];
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(c.in[0].device());
    const at::Tensor freqs =
        at::outer(at::arange(s, f32), RopeInverseFrequencies(c.op.rope, d, f32));
    const at::Tensor emb = at::cat({freqs, freqs}, -1);
    const auto dtype = c.in[0].scalar_type();
    return {emb.cos().to(dtype).unsqueeze(0), emb.sin().to(dtype).unsqueeze(0)};
  }
};
template <>
struct Kernel<OpKind::kRope> {
  static Outputs Run(const KernelCall& c) {
    const at::Tensor& x = c.in[0];
    const int64_t half = x.size(-1) / 2;
    const at::Tensor rotated = at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
    return {x * c.in[1].unsqueeze(1) + rotated * c.in[2].unsqueeze(1)};
  }
};
template <>
struct Kernel<OpKind::kCausalMask> {
  // transformers' eager mask: 0 where a position may attend, the dtype's lowest value
  // where it may not, [b, 1, s, s] in the hidden states' dtype.
  static Outputs Run(const KernelCall& c) {
    at::NoGradGuard no_grad;
    const std::vector<int64_t> sizes = c.out_sizes();
    const int64_t s = sizes[3];
    const auto type = c.in[0].scalar_type();
    const auto device = at::TensorOptions().device(c.in[0].device());
    at::Tensor future = at::ones({s, s}, device.dtype(at::kBool)).triu(1);
    if (c.op.sliding_window > 0)  // and the past beyond the window (masking_utils.py:90-99)
      future =
          future.logical_or(at::ones({s, s}, device.dtype(at::kBool)).tril(-c.op.sliding_window));
    const double lowest =
        type == at::kFloat ? std::numeric_limits<float>::lowest() : -3.3895313892515355e38;  // bf16
    return {at::where(future, at::scalar_tensor(lowest, device.dtype(type)),
                      at::scalar_tensor(0.0, device.dtype(type)))
                .expand(sizes)
                .contiguous()};
  }
};
template <>
struct Kernel<OpKind::kWindowMask> {
  // transformers' SDPA sliding-window mask, as masking_utils.py builds it without vmap:
  // true where a position may attend, [1, 1, s, s].
  static Outputs Run(const KernelCall& c) {
    at::NoGradGuard no_grad;
    const int64_t s = c.out_sizes()[3];
    const auto positions = at::TensorOptions().dtype(at::kLong).device(c.in[0].device());
    const at::Tensor q = at::arange(s, positions).view({1, 1, s, 1});
    const at::Tensor kv = at::arange(s, positions).view({1, 1, 1, s});
    const at::Tensor in_window =
        at::ones({}, positions.dtype(at::kBool)) & kv.gt(q - c.op.sliding_window);
    return {in_window & kv.le(q)};
  }
};
template <>
struct Kernel<OpKind::kView> {
  static Outputs Run(const KernelCall& c) {
    const at::Tensor& x = c.in[0];
    const std::vector<int64_t> part = c.out_sizes();
    const size_t parts = c.op.outputs.size();
    if (parts > 1 && x.dim() == static_cast<int64_t>(part.size()))
      return x.split(part.back(), -1);  // chunk(parts, -1)
    if (part.size() == 4) {  // [b, s, .. parts * heads * d ..] -> parts x [b, heads, s, d]
      const int64_t width = part[1] * part[3];
      Outputs out;
      for (size_t k = 0; k < parts; ++k) {
        const at::Tensor piece = x.narrow(-1, c.op.slice_begin + k * width, width);
        out.push_back(piece.view({part[0], part[2], part[1], part[3]}).transpose(1, 2));
      }
      return out;
    }
    if (part.size() == 2) return {x.select(1, 0)};  // [b, s, h] -> the first token
    return {x.view(part)};
  }
};
template <>
struct Kernel<OpKind::kRepeatKv> {
  static Outputs Run(const KernelCall& c) {
    const at::Tensor& x = c.in[0];
    const int64_t b = x.size(0), kv = x.size(1), s = x.size(2), d = x.size(3);
    const int64_t rep = c.out_sizes()[1] / kv;  // query heads per key/value head
    return {x.unsqueeze(2).expand({b, kv, rep, s, d}).reshape({b, kv * rep, s, d})};
  }
};
template <>
struct Kernel<OpKind::kMergeHeads> {
  static Outputs Run(const KernelCall& c) {
    return {c.in[0].transpose(1, 2).contiguous().view(c.out_sizes())};
  }
};
template <>
struct Kernel<OpKind::kAttnScores> {
  // As transformers writes it, out of place: matmul * scaling, then + mask.
  static Outputs Run(const KernelCall& c) {
    const at::Tensor& q = c.in[0];
    const double scale = c.op.attention_scale > 0
                             ? c.op.attention_scale
                             : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    at::Tensor scores = at::matmul(q, c.in[1].transpose(-2, -1)) * scale;
    if (c.in.size() > 2) scores = scores + c.in[2];
    return {scores};
  }
};
template <>
struct Kernel<OpKind::kContiguous> {
  static Outputs Run(const KernelCall& c) { return {c.in[0].clone(at::MemoryFormat::Contiguous)}; }
};
template <>
struct Kernel<OpKind::kCastLike> {
  static Outputs Run(const KernelCall& c) { return {c.in[0].to(c.in[1].scalar_type())}; }
};
template <>
struct Kernel<OpKind::kSoftmax> {
  static Outputs Run(const KernelCall& c) {
    return {c.op.upcast ? at::softmax(c.in[0], -1, at::kFloat) : at::softmax(c.in[0], -1)};
  }
};
template <>
struct Kernel<OpKind::kAttnContext> {
  static Outputs Run(const KernelCall& c) { return {at::matmul(c.in[0], c.in[1])}; }
};
template <>
struct Kernel<OpKind::kSdpa> {
  static Outputs Run(const KernelCall& c) {
    std::optional<double> scale;
    if (c.op.attention_scale > 0) scale = c.op.attention_scale;
    // A bool window mask, expanded over the batch as sdpa_mask passes it (a view);
    // SDPA converts it into a [b, 1, s, s] additive mask itself.
    std::optional<at::Tensor> mask;
    if (c.in.size() > 3) mask = c.in[3].expand({c.in[0].size(0), 1, -1, -1});
    return {at::scaled_dot_product_attention(c.in[0], c.in[1], c.in[2], mask, c.op.dropout_p,
                                             c.op.causal, scale)};
  }
};
template <>
struct Kernel<OpKind::kCastF32> {
  static Outputs Run(const KernelCall& c) { return {c.in[0].to(at::kFloat)}; }
};
template <>
struct Kernel<OpKind::kLogSoftmax> {
  static Outputs Run(const KernelCall& c) { return {at::log_softmax(c.in[0], -1)}; }
};
template <>
struct Kernel<OpKind::kNllLoss> {
  static Outputs Run(const KernelCall& c) {
    const at::Tensor& x = c.in[0];
    return {at::nll_loss(x.reshape({-1, x.size(-1)}), c.in[1].reshape({-1}))};
  }
};

// ---- mixture of experts, as transformers' router and grouped_mm experts path run it ----
template <>
struct Kernel<OpKind::kTopK> {
  static Outputs Run(const KernelCall& c) {
    auto [values, indices] = at::topk(c.in[0], c.out_sizes().back(), -1);
    return {values, indices};
  }
};
template <>
struct Kernel<OpKind::kRenormalize> {
  static Outputs Run(const KernelCall& c) {
    at::Tensor v = c.in[0];
    return {v.div_(v.sum(-1, /*keepdim=*/true))};
  }
};
template <>
struct Kernel<OpKind::kExpertSort> {
  // sort, histc (over floats on the CPU, ints on CUDA) and cumsum (moe.py:440-450).
  static Outputs Run(const KernelCall& c) {
    const at::Tensor ids = c.in[0].reshape({-1});
    auto [sorted, perm] = at::sort(ids);
    const int64_t experts = c.out_sizes(2)[0];
    const at::Tensor hist_in = sorted.is_cuda() ? sorted.to(at::kInt) : sorted.to(at::kFloat);
    const at::Tensor counts = at::histc(hist_in, experts, 0, static_cast<double>(experts - 1));
    if (c.expert_load != nullptr) {
      const double balanced = static_cast<double>(ids.numel()) / static_cast<double>(experts);
      c.expert_load->Record(
          counts.max() / balanced,
          static_cast<double>(experts) / static_cast<double>(c.out_sizes(0).back()));
    }
    const std::vector<int64_t> sizes = c.out_sizes(0);
    return {sorted.view(sizes), perm.view(sizes), at::cumsum(counts, 0, at::kInt)};
  }
};
template <>
struct Kernel<OpKind::kGatherRows> {
  static Outputs Run(const KernelCall& c) {
    const std::vector<int64_t> sizes = c.out_sizes();
    const at::Tensor& x = c.in[0];
    const at::Tensor perm = c.in[1].reshape({-1});
    // Rows of the output's width: tokens [b, s, h] -> [b * s, h], routing weights
    // [b, s, k] -> [b * s * k, 1].
    const at::Tensor rows = x.reshape({-1, sizes.back()});
    at::Tensor index = perm;
    if (c.op.row_divisor > 0) index = perm.div(c.op.row_divisor, "floor");
    if (c.op.inverse_permutation) {
      index = at::empty_like(perm);
      index.index_put_({perm}, at::arange(perm.numel(), perm.options()));
    }
    return {rows.index({index}).view(sizes)};
  }
};
template <>
struct Kernel<OpKind::kGroupedMm> {
  // grouped_mm(x, w.transpose(-2, -1), offs) over [pairs, in] rows (x already in w's dtype).
  static Outputs Run(const KernelCall& c) {
    const at::Tensor& w = c.in[1];
    const at::Tensor x = c.in[0].reshape({-1, w.size(-1)});
    return {at::_grouped_mm(x, w.transpose(-2, -1), c.in[2]).view(c.out_sizes())};
  }
};
template <>
struct Kernel<OpKind::kSumTopK> {
  static Outputs Run(const KernelCall& c) { return {c.in[0].sum(-2)}; }
};
// TRL's fused LM head is planned for the Python stacks; train refuses --loss chunked before
// it builds a graph (train_command.cc), so this kernel is never reached.
template <>
struct Kernel<OpKind::kChunkedNll> {
  static Outputs Run(const KernelCall&) {
    throw std::runtime_error("train computes the full loss; --loss chunked is TRL's fused LM head");
  }
};
// An imported op carries its recorded costs, not its maths: `train` refuses it by name.
// OpNode::name is "<module>/<aten op>" (docs/graph-file.md).
template <>
struct Kernel<OpKind::kTraced> {
  static Outputs Run(const KernelCall& c) {
    const std::string aten = c.op.traced ? c.op.traced->aten : "?";
    throw std::runtime_error("train cannot run the imported op aten." + aten + " (module " +
                             std::string(ModuleOfTracedName(c.op.name)) + ")");
  }
};

}  // namespace

void ExpertLoad::Record(const at::Tensor& ratio, double worst_case) {
  at::NoGradGuard no_grad;
  max_over_balanced = calls == 0 ? ratio : at::maximum(max_over_balanced, ratio);
  sum_over_balanced = calls == 0 ? ratio : sum_over_balanced + ratio;
  ++calls;
  worst_case_ratio = worst_case;
}

RoutingSeen Summarize(const ExpertLoad& load) {
  if (load.calls == 0) return {};
  return {
      .calls = load.calls,
      .max_over_balanced = load.max_over_balanced.item<double>(),
      .mean_over_balanced = load.sum_over_balanced.item<double>() / static_cast<double>(load.calls),
      .worst_case_ratio = load.worst_case_ratio};
}

std::vector<int64_t> KernelCall::out_sizes(size_t k) const {
  std::vector<int64_t> sizes;
  for (const Dim& d : graph.tensor(op.outputs.at(k)).shape.dims())
    sizes.push_back(SizeIn(d, {.micro_batch = micro_batch, .seq_len = seq_len}));
  return sizes;
}

std::vector<at::Tensor> RunKernel(const KernelCall& call) {
  return VisitOpKind(call.op.kind, [&]<OpKind K>() { return Kernel<K>::Run(call); });
}

}  // namespace headroom
