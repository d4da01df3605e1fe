#include "runtime/graph_executor.h"

#include <climits>
#include <cmath>
#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "runtime/block_checkpoint.h"
#include "runtime/fused_dropout.h"
#include "runtime/torch_dtypes.h"

namespace headroom {
namespace {

constexpr int kKeep = INT_MAX / 2;  // uses of tensors a frame must not release
// transformers' rotary frequencies: 1 / theta^(2i/d), with Llama 3.1's scaling
// (_compute_llama3_parameters): long wavelengths divided by the factor, short ones kept,
// and a smooth blend between them.
at::Tensor RopeInverseFrequencies(const RopeParams& rope, int64_t d, at::TensorOptions f32) {
  at::Tensor inv_freq = 1.0 / at::pow(rope.theta, at::arange(0, d, 2, f32) / d);
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

bool IsParam(const OpGraph& g, TensorId t) { return g.tensor(t).role == TensorRole::kParameter; }

}  // namespace

GraphExecutor::GraphExecutor(const OpGraph& graph, const ModelSpec& spec,
                             const TrainingConfig& config, const ParameterStore& params)
    : graph_(graph),
      spec_(spec),
      config_(config),
      params_(params),
      states_(graph, RegimeOf(config.precision), CostTargetOf(config)) {
  for (const BlockSegment& seg : graph.blocks()) {
    const int block = static_cast<int>(external_inputs_.size());
    std::vector<TensorId> ext = {seg.input}, reads;
    for (int o = seg.first_op.value; o <= seg.last_op.value; ++o) {
      for (TensorId in : graph.op(OpId{o}).inputs) {
        const TensorInfo& info = graph.tensor(in);
        const bool inside = info.producer.valid() && graph.op(info.producer).block == block;
        if (IsParam(graph, in) || inside) continue;
        reads.push_back(in);
        if (std::find(ext.begin(), ext.end(), in) == ext.end()) ext.push_back(in);
      }
    }
    external_inputs_.push_back(std::move(ext));
    outside_reads_.push_back(std::move(reads));
  }
}

std::vector<int64_t> GraphExecutor::Sizes(TensorId t) const {
  std::vector<int64_t> sizes;
  for (const Dim& d : graph_.tensor(t).shape.dims()) {
    sizes.push_back(d.kind == Dim::Kind::kBatch ? config_.micro_batch
                    : d.kind == Dim::Kind::kSeq ? config_.seq_len
                                                : d.value);
  }
  return sizes;
}

at::Tensor GraphExecutor::Forward(std::vector<at::Tensor> inputs,
                                  const std::vector<bool>& checkpointed) {
  Frame f;
  f.values = std::move(inputs);
  f.values.resize(graph_.num_tensors());
  f.uses_left.assign(graph_.num_tensors(), 0);
  for (int t = 0; t < graph_.num_tensors(); ++t) {
    f.uses_left[t] = static_cast<int>(graph_.Consumers(TensorId{t}).size());
  }
  for (int o = 0; o < graph_.num_ops(); ++o) {
    const OpNode& op = graph_.op(OpId{o});
    if (op.block < 0 || !checkpointed.at(op.block)) {
      RunOp(op, f);
      continue;
    }
    const BlockSegment& seg = graph_.blocks()[op.block];
    if (o != seg.first_op.value) continue;  // ran as part of the block
    std::vector<at::Tensor> ext;
    for (TensorId t : external_inputs_[op.block]) ext.push_back(f.values[t.value]);
    at::Tensor out = CheckpointBlock(*this, op.block, ext);
    ext.clear();
    f.values[seg.output.value] = std::move(out);
    for (TensorId in : outside_reads_[op.block]) UseDone(in, f);  // the block's ops have read them
  }
  f.cast_cache.clear();  // autocast exit
  return std::move(f.values[graph_.loss().value]);
}

at::Tensor GraphExecutor::RunBlock(int block, const std::vector<at::Tensor>& external_inputs) {
  const BlockSegment& seg = graph_.blocks().at(block);
  Frame f;
  f.values.resize(graph_.num_tensors());
  f.uses_left.assign(graph_.num_tensors(), 0);
  const auto& ext = external_inputs_[block];
  for (size_t i = 0; i < ext.size(); ++i) {
    f.values[ext[i].value] = external_inputs[i];
    f.uses_left[ext[i].value] = kKeep;  // owned by the caller
  }
  for (int o = seg.first_op.value; o <= seg.last_op.value; ++o) {
    for (TensorId out : graph_.op(OpId{o}).outputs) {
      int uses = 0;
      for (OpId c : graph_.Consumers(out)) uses += graph_.op(c).block == block ? 1 : 0;
      f.uses_left[out.value] = out == seg.output ? kKeep : uses;
    }
  }
  for (int o = seg.first_op.value; o <= seg.last_op.value; ++o) RunOp(graph_.op(OpId{o}), f);
  return std::move(f.values[seg.output.value]);
}

void GraphExecutor::UseDone(TensorId t, Frame& frame) {
  if (--frame.uses_left[t.value] == 0) frame.values[t.value].reset();
}

at::Tensor GraphExecutor::Input(const OpNode& op, size_t i, Frame& frame) {
  const TensorId t = op.inputs[i];
  const bool param = IsParam(graph_, t);
  const at::Tensor& value = param ? params_[t] : frame.values[t.value];
  if (!value.defined()) {
    throw std::logic_error("executor: " + op.name + " reads " + graph_.tensor(t).name +
                           ", which is not live");
  }
  const DType used = states_.UsedDType(op, i);
  if (used == states_[t].dtype) return value;
  const c10::ScalarType type = ToScalarType(used);
  if (param && graph_.tensor(t).param.trainable) {
    // Autocast caches the casts of leaf weights that require grad until autocast exits.
    auto it = frame.cast_cache.find(t.value);
    if (it == frame.cast_cache.end()) it = frame.cast_cache.emplace(t.value, value.to(type)).first;
    return it->second;
  }
  return value.to(type);
}

void GraphExecutor::RunOp(const OpNode& op, Frame& f) {
  std::vector<at::Tensor> in;
  for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(Input(op, i, f));
  std::vector<at::Tensor> out;
  const at::Tensor& x = in.empty() ? at::Tensor() : in[0];
  switch (op.kind) {
    case OpKind::kEmbedding:
      out = {at::embedding(in[1], in[0])};
      break;
    case OpKind::kLinear:
      out = {at::linear(x, in[1], in.size() > 2 ? std::optional<at::Tensor>(in[2]) : std::nullopt)};
      break;
    case OpKind::kLayerNorm:
      out = {at::layer_norm(x, {x.size(-1)}, in[1], in[2], op.eps)};
      break;
    case OpKind::kRmsNorm: {
      // Hugging Face's LlamaRMSNorm, op for op.
      const at::Tensor x32 = x.to(at::kFloat);
      const at::Tensor rstd = at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + op.eps);
      out = {in[1] * (x32 * rstd).to(x.scalar_type())};
      break;
    }
    case OpKind::kAdd:
      out = {in[0] + in[1]};
      break;
    case OpKind::kMul:
      out = {in[0] * in[1]};
      break;
    case OpKind::kScale:
      out = {x * op.scalar};
      break;
    case OpKind::kAddScalar:
      out = {x + op.scalar};
      break;
    case OpKind::kCube:
      out = {at::pow(x, 3.0)};
      break;
    case OpKind::kKvCacheCopy:
      out = {at::cat({at::empty({0}, x.options()), x}, -2)};
      break;
    case OpKind::kGelu:
      out = {at::gelu(x)};
      break;
    case OpKind::kGeluTanh:
      out = {at::gelu(x, "tanh")};
      break;
    case OpKind::kSilu:
      out = {at::silu(x)};
      break;
    case OpKind::kTanh:
      out = {at::tanh(x)};
      break;
    case OpKind::kDropout:
      out = {FusedDropout(x, op.dropout_p)};
      break;
    case OpKind::kRopeTables: {
      at::NoGradGuard no_grad;
      const int64_t d = spec_.head_dim;
      const auto f32 = at::TensorOptions().dtype(at::kFloat).device(x.device());
      const at::Tensor inv_freq = RopeInverseFrequencies(op.rope, d, f32);
      const at::Tensor freqs = at::outer(at::arange(config_.seq_len, f32), inv_freq);
      const at::Tensor emb = at::cat({freqs, freqs}, -1);
      out = {emb.cos().to(x.scalar_type()).unsqueeze(0),  // [1, s, d], broadcast over b
             emb.sin().to(x.scalar_type()).unsqueeze(0)};
      break;
    }
    case OpKind::kRope: {
      const int64_t half = x.size(-1) / 2;
      const at::Tensor rotated = at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
      out = {x * in[1].unsqueeze(1) + rotated * in[2].unsqueeze(1)};
      break;
    }
    case OpKind::kCausalMask: {
      // transformers' eager mask: 0 where a position may attend, the dtype's lowest
      // value where it may not, [b, 1, s, s] in the hidden states' dtype.
      at::NoGradGuard no_grad;
      const int64_t s = config_.seq_len;
      const auto device = at::TensorOptions().device(params_.device());
      const at::Tensor future = at::ones({s, s}, device.dtype(at::kBool)).triu(1);
      const double lowest = x.scalar_type() == at::kFloat ? std::numeric_limits<float>::lowest()
                                                          : -3.3895313892515355e38;  // bf16
      out = {at::where(future, at::scalar_tensor(lowest, device.dtype(x.scalar_type())),
                       at::scalar_tensor(0.0, device.dtype(x.scalar_type())))
                 .expand({config_.micro_batch, 1, s, s})
                 .contiguous()};
      break;
    }
    case OpKind::kView: {
      const std::vector<int64_t> part = Sizes(op.outputs[0]);
      if (part.size() == 4) {  // [b, s, parts * heads * d] -> parts x [b, heads, s, d]
        const int64_t width = part[1] * part[3];
        for (const at::Tensor& piece : x.split(width, -1))
          out.push_back(piece.view({part[0], part[2], part[1], part[3]}).transpose(1, 2));
      } else if (part.size() == 2) {  // [b, s, h] -> the first token
        out = {x.select(1, 0)};
      } else {
        out = {x.view(part)};
      }
      break;
    }
    case OpKind::kRepeatKv: {
      const int64_t b = x.size(0), kv = x.size(1), s = x.size(2), d = x.size(3);
      const int64_t rep = spec_.num_heads / kv;
      out = {x.unsqueeze(2).expand({b, kv, rep, s, d}).reshape({b, kv * rep, s, d})};
      break;
    }
    case OpKind::kMergeHeads:
      out = {x.transpose(1, 2).contiguous().view(Sizes(op.outputs[0]))};
      break;
    case OpKind::kAttnScores: {
      // As transformers writes it, out of place: matmul * scaling, then + mask.
      at::Tensor scores = at::matmul(x, in[1].transpose(-2, -1)) *
                          (1.0 / std::sqrt(static_cast<double>(x.size(-1))));
      if (in.size() > 2) scores = scores + in[2];
      out = {scores};
      break;
    }
    case OpKind::kContiguous:
      out = {x.clone(at::MemoryFormat::Contiguous)};
      break;
    case OpKind::kCastLike:
      out = {x.to(in[1].scalar_type())};
      break;
    case OpKind::kSoftmax:
      out = {op.upcast ? at::softmax(x, -1, at::kFloat) : at::softmax(x, -1)};
      break;
    case OpKind::kAttnContext:
      out = {at::matmul(x, in[1])};
      break;
    case OpKind::kSdpa:
      out = {
          at::scaled_dot_product_attention(x, in[1], in[2], std::nullopt, op.dropout_p, op.causal)};
      break;
    case OpKind::kCastF32:
      out = {x.to(at::kFloat)};
      break;
    case OpKind::kLogSoftmax:
      out = {at::log_softmax(x, -1)};
      break;
    case OpKind::kNllLoss:
      out = {at::nll_loss(x.reshape({-1, x.size(-1)}), in[1].reshape({-1}))};
      break;
  }
  if (out.size() != op.outputs.size())
    throw std::logic_error("executor: " + op.name + " produced the wrong number of outputs");
  in.clear();
  for (size_t k = 0; k < out.size(); ++k) f.values[op.outputs[k].value] = std::move(out[k]);
  for (TensorId t : op.inputs) {
    if (!IsParam(graph_, t)) UseDone(t, f);
  }
}

}  // namespace headroom
