// TRL's fused LM head (planner/simulate/chunked_loss.h) on hand-worked sizes: each number
// is the sum written beside it, from the rule's terms in chunked_logprob.py. The reference
// suite measures the same rule against TRL's own code (tests/reference/cases.py, chunked).
#include "planner/simulate/chunked_loss.h"

#include <gtest/gtest.h>

namespace headroom {
namespace {

// fp32 throughout on the CPU (no autocast): the tile is fp32, so the fold's .float() copies
// nothing and the gradient products take the tile as it is. b = 2, s = 65: N = 128 tokens,
// one 128-token tile of 128 vocabulary entries (T = 128 * 128 * 4 = 65,536 B).
TEST(ChunkedLoss, Fp32OnTheCpu) {
  const ChunkedLossCall call{.seq_len = 65,
                             .hidden = 64,
                             .vocab = 512,
                             .vocab_tile = 128,
                             .hidden_grad = true,
                             .weight_grad = true};
  // flattened copy (b > 1) 128*64*4 = 32,768 + mask 128 + statistics 7*128*4 = 3,584
  // + tile buffer 128*128*4 = 65,536 + fold 3T + bool tile = 196,608 + 16,384
  EXPECT_EQ(call.ForwardTransientBytes(2), 32'768 + 128 + 3'584 + 65'536 + 212'992);
  // b = 1: the slice flattens to a view
  EXPECT_EQ(call.ForwardTransientBytes(1), 64 + 1'792 + 64 * 128 * 4 + 3 * 64 * 128 * 4 + 64 * 128);
  // targets int64 1,024 + log Z and entropy 2 * 512 + two masks 2 * 128
  EXPECT_EQ(call.ForwardSavedBytes(2), 1'024 + 1'024 + 256);
  // grad_logprobs 512 + fp32 accumulators 32,768 + 131,072 + tile buffer 65,536
  // + fold 7T + bool tile = 458,752 + 16,384
  EXPECT_EQ(call.BackwardPeakBytes(2), 512 + 32'768 + 131'072 + 65'536 + 475'136);
  EXPECT_EQ(call.ReturnedHiddenGradBytes(2), 32'768);
  // less the [2, 65, 64] fp32 input gradient (33,280) and the weight's (131,072)
  EXPECT_EQ(call.BackwardWorkspaceBytes(2), 705'024 - 33'280 - 131'072);
  // Gemma 2's soft cap holds one more fp32 tile in the backward's fold (t = tanh(...)).
  ChunkedLossCall capped = call;
  capped.softcap = true;
  EXPECT_EQ(capped.BackwardPeakBytes(2) - call.BackwardPeakBytes(2), 65'536);
  EXPECT_EQ(capped.ForwardTransientBytes(2), call.ForwardTransientBytes(2));
}

// A full fine-tune under CPU autocast: fp32 hidden states and weights, bf16 tiles. One
// sample of 8,193 tokens fills two 4,096-token tiles, the vocabulary of 1,000 is one tile
// of a 32,768-wide buffer (T = 4,096 * 1,000 * 4 = 16,384,000 B).
TEST(ChunkedLoss, AutocastCopiesAndAFullTileBuffer) {
  const ChunkedLossCall call{.seq_len = 8'193,
                             .hidden = 256,
                             .vocab = 1'000,
                             .vocab_tile = 32'768,
                             .compute_dtype = DType::kBF16,
                             .hidden_grad = true,
                             .weight_grad = true,
                             .cpu_bf16 = CpuBf16::kAtenGemm};
  const int64_t tile_buffer = 4'096LL * 32'768 * 2;  // 268,435,456
  const int64_t hidden_chunk = 4'096 * 256 * 2;      // 2,097,152
  const int64_t weight_chunk = 1'000 * 256 * 2;      // 512,000
  // mask 8,192 + statistics 229,376 + buffer + hidden chunk + fold 3T + bool tile
  EXPECT_EQ(call.ForwardTransientBytes(1),
            8'192 + 229'376 + tile_buffer + hidden_chunk + 49'152'000 + 4'096'000);
  // grad_logprobs 32,768 + accumulators 8,388,608 + 1,024,000 + buffer + both chunks
  // + fold 7T + bool tile (above the products' fp32 copies, T + 4,096 * 256 * 4)
  EXPECT_EQ(call.BackwardPeakBytes(1), 32'768 + 8'388'608 + 1'024'000 + tile_buffer + hidden_chunk +
                                           weight_chunk + 114'688'000 + 4'096'000);
  // The emulated bf16 gemm's fp32 product sits beside the forward's weight chunk, under
  // the fold's height.
  ChunkedLossCall emulated = call;
  emulated.cpu_bf16 = CpuBf16::kEmulated;
  EXPECT_EQ(emulated.ForwardTransientBytes(1), call.ForwardTransientBytes(1));
}

// CUDA: Triton folds in registers and the products accumulate inside cuBLAS; the compact
// path copies the labelled rows. LoRA in bf16: only the hidden state has a gradient,
// cast back to bf16 at the end. b = 2, s = 4,097: N = 8,192; Llama 3's vocabulary.
TEST(ChunkedLoss, TritonOnCuda) {
  const ChunkedLossCall call{.seq_len = 4'097,
                             .hidden = 4'096,
                             .vocab = 128'256,
                             .vocab_tile = 32'768,
                             .hidden_dtype = DType::kBF16,
                             .weight_dtype = DType::kBF16,
                             .compute_dtype = DType::kBF16,
                             .hidden_grad = true,
                             .triton = true};
  const int64_t tile_buffer = 4'096LL * 32'768 * 2;  // 268,435,456
  // rows copied 8,192 * 4,096 * 2 + their indices 2 * 8,192 * 8 + mask + statistics
  EXPECT_EQ(call.ForwardTransientBytes(2), 67'108'864 + 131'072 + 8'192 + 229'376 + tile_buffer);
  // grad_logprobs + fp32 accumulator 134,217,728 + buffer + the bf16 cast 67,108,864
  EXPECT_EQ(call.BackwardPeakBytes(2), 32'768 + 134'217'728 + tile_buffer + 67'108'864);
  // less the [2, 4,097, 4,096] bf16 input gradient, 67,125,248
  EXPECT_EQ(call.BackwardWorkspaceBytes(2), call.BackwardPeakBytes(2) - 67'125'248);
}

}  // namespace
}  // namespace headroom
