#include "planner/simulate/chunked_loss.h"

#include <algorithm>

#include "planner/simulate/onednn_scratch.h"

namespace headroom {
namespace {

// chunked_logprob.py TOKEN_CHUNK_SIZE: the tokens of one tile.
constexpr int64_t kTokenTile = 4096;
// The forward's running statistics, fp32 per token, allocated whatever the outputs:
// running_max, sum_exp, x_sum_exp, sq_sum_exp, z_sum, max_before_target, target_logit.
constexpr int64_t kForwardStatistics = 7;

// The sizes one call works with at a micro-batch.
struct Tiles {
  int64_t tokens;     // N = b * (s - 1): every position is scored (the CPU's path; on CUDA
                      // the labelled ones, at most this many)
  int64_t rows;       // n = min(N, 4096)
  int64_t cols;       // the widest tile: min(vocab_tile, vocab)
  int64_t tile_f32;   // T: one fp32 copy of a tile
  int64_t tile_bool;  // a bool mask over a tile
};

Tiles TilesAt(const ChunkedLossCall& c, int64_t micro_batch) {
  Tiles t;
  t.tokens = micro_batch * (c.seq_len - 1);
  t.rows = std::min(t.tokens, kTokenTile);
  t.cols = std::min(c.vocab_tile, c.vocab);
  t.tile_f32 = StorageBytes(DType::kF32, t.rows * t.cols);
  t.tile_bool = StorageBytes(DType::kBool, t.rows * t.cols);
  return t;
}

// mm_buf = torch.empty((min(N, TOKEN_CHUNK_SIZE), chunk_size), dtype=compute_dtype): the
// whole chunk_size wide even when the vocabulary is narrower.
int64_t TileBuffer(const ChunkedLossCall& c, const Tiles& t) {
  return StorageBytes(c.compute_dtype, t.rows * c.vocab_tile);
}

// hidden[token_start:token_end].to(compute_dtype): a copy when the dtypes differ (fp32
// hidden states under autocast), held through the vocabulary loop.
int64_t HiddenChunkCopy(const ChunkedLossCall& c, const Tiles& t) {
  return c.hidden_dtype == c.compute_dtype ? 0 : StorageBytes(c.compute_dtype, t.rows * c.hidden);
}

// weight[start:end].to(compute_dtype): a copy when the dtypes differ (fp32 weights under
// autocast).
int64_t WeightChunkCopy(const ChunkedLossCall& c, const Tiles& t) {
  return c.weight_dtype == c.compute_dtype ? 0 : StorageBytes(c.compute_dtype, t.cols * c.hidden);
}

// torch.mm(hidden_chunk, w_chunk.t(), out=tile) in 16 bits on the CPU: the kernel's
// scratch, as for a linear layer's product (op_cost.cc).
int64_t TileProductScratch(const ChunkedLossCall& c, const Tiles& t) {
  if (!c.cpu_bf16 || c.compute_dtype != DType::kBF16) return 0;
  if (*c.cpu_bf16 == CpuBf16::kEmulated)
    return StorageBytes(DType::kF32, t.rows * t.cols);  // the whole fp32 product
  if (*c.cpu_bf16 == CpuBf16::kAtenGemm) return 0;
  // oneDNN's brgemm (AVX512-BF16 or AMX), at the rows it runs (micro-batch already in them)
  return BrgemmProduct{.kernel = *c.cpu_bf16,
                       .rows = t.rows,
                       .inner = c.hidden,
                       .cols = t.cols,
                       .transposed_second = true,
                       .threads = c.cpu_threads}
      .ScratchBytes(1);
}

// _forward_tile (the CPU's fold, torch ops on the whole tile) at its height: z = the
// transformed fp32 tile, the bool `before_target` (is_top1), and e = exp(z - max) beside
// the entropy's e * z: three fp32 tiles and a bool one. The transform itself holds at
// most three (two without a soft cap).
int64_t ForwardFold(const ChunkedLossCall& c, const Tiles& t) {
  if (c.triton) return 0;
  return 3 * t.tile_f32 + t.tile_bool;
}

// _backward_tile at its height: y, z, log_p, p and grad (five fp32 tiles; with a soft cap
// t = tanh(...) too), the bool is_target, then is_target.float() - p beside them.
int64_t BackwardFold(const ChunkedLossCall& c, const Tiles& t) {
  if (c.triton) return 0;
  return (c.softcap ? 8 : 7) * t.tile_f32 + t.tile_bool;
}

// _addmm_fp32 on the CPU: acc.addmm_(a.float(), b.float()), fp32 copies of both 16-bit
// operands (CUDA's addmm takes out_dtype=float32 and copies nothing). The hidden state's
// gradient multiplies the tile by the weight chunk; the weight's, the tile's transpose by
// the hidden chunk.
int64_t GradientProducts(const ChunkedLossCall& c, const Tiles& t) {
  if (c.triton || c.compute_dtype == DType::kF32) return 0;
  int64_t most = 0;
  if (c.hidden_grad) most = t.tile_f32 + StorageBytes(DType::kF32, t.cols * c.hidden);
  if (c.weight_grad)
    most = std::max(most, t.tile_f32 + StorageBytes(DType::kF32, t.rows * c.hidden));
  return most;
}

int64_t HiddenGradF32(const ChunkedLossCall& c, const Tiles& t) {
  return c.hidden_grad ? StorageBytes(DType::kF32, t.tokens * c.hidden) : 0;
}
int64_t WeightGradF32(const ChunkedLossCall& c) {
  return c.weight_grad ? StorageBytes(DType::kF32, c.vocab * c.hidden) : 0;
}

}  // namespace

int64_t ChunkedLossCall::ForwardTransientBytes(int64_t micro_batch) const {
  const Tiles t = TilesAt(*this, micro_batch);
  // hidden_states[:, :-1].reshape(-1, hidden) copies when b > 1 (the slice's rows are not
  // contiguous); CUDA's compact path copies the labelled rows (hidden_states[mask]) and
  // their indices (nonzero: int64 [N, 2]).
  int64_t flattened = 0;
  if (triton) {
    flattened =
        StorageBytes(hidden_dtype, t.tokens * hidden) + StorageBytes(DType::kI64, 2 * t.tokens);
  } else if (micro_batch > 1) {
    flattened = StorageBytes(hidden_dtype, t.tokens * hidden);
  }
  const int64_t mask = StorageBytes(DType::kBool, t.tokens);  // labels != -100
  const int64_t statistics = kForwardStatistics * StorageBytes(DType::kF32, t.tokens);
  const int64_t product = WeightChunkCopy(*this, t) + TileProductScratch(*this, t);
  return flattened + mask + statistics + TileBuffer(*this, t) + HiddenChunkCopy(*this, t) +
         std::max(product, ForwardFold(*this, t));
}

int64_t ChunkedLossCall::ForwardSavedBytes(int64_t micro_batch) const {
  const int64_t n = micro_batch * (seq_len - 1);
  // ctx.save_for_backward(hidden, weight, bias, targets, log_z, entropy): int64 targets
  // (labels.clamp(min=0)), fp32 log Z and entropy; then each of log_probs and entropy is
  // masked_fill(~mask, 0), whose backward keeps its own ~mask.
  return StorageBytes(DType::kI64, n) + 2 * StorageBytes(DType::kF32, n) +
         2 * StorageBytes(DType::kBool, n);
}

int64_t ChunkedLossCall::BackwardPeakBytes(int64_t micro_batch) const {
  const Tiles t = TilesAt(*this, micro_batch);
  // grad_logprobs (masked_fill's backward) and the fp32 accumulators, zeroed first.
  const int64_t held = StorageBytes(DType::kF32, t.tokens) + HiddenGradF32(*this, t) +
                       WeightGradF32(*this) + TileBuffer(*this, t) + HiddenChunkCopy(*this, t) +
                       WeightChunkCopy(*this, t);
  // The return casts each accumulator to its input's dtype (no copy for fp32) while the
  // loop's locals are still alive.
  int64_t casts = 0;
  if (hidden_grad && hidden_dtype != DType::kF32)
    casts += StorageBytes(hidden_dtype, t.tokens * hidden);
  if (weight_grad && weight_dtype != DType::kF32)
    casts += StorageBytes(weight_dtype, vocab * hidden);
  return held + std::max({TileProductScratch(*this, t), BackwardFold(*this, t),
                          GradientProducts(*this, t), casts});
}

int64_t ChunkedLossCall::ReturnedHiddenGradBytes(int64_t micro_batch) const {
  return hidden_grad ? StorageBytes(hidden_dtype, micro_batch * (seq_len - 1) * hidden) : 0;
}

int64_t ChunkedLossCall::BackwardWorkspaceBytes(int64_t micro_batch) const {
  const int64_t input_grad =
      hidden_grad ? StorageBytes(hidden_dtype, micro_batch * seq_len * hidden) : 0;
  const int64_t weight_grad_bytes = weight_grad ? StorageBytes(weight_dtype, vocab * hidden) : 0;
  return std::max(BackwardPeakBytes(micro_batch) - input_grad - weight_grad_bytes,
                  ReturnedHiddenGradBytes(micro_batch));
}

}  // namespace headroom
