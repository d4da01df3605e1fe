#include "planner/simulate/onednn_scratch.h"

#include <algorithm>

#include "planner/simulate/internal/onednn_amx_conf.h"
#include "planner/simulate/onednn_amx_blocking.h"

namespace headroom {
namespace {

using amx::CeilDiv;
using amx::RoundUp;

// The largest divisor of `blocks` that is at most `threads`: the threads given work.
int64_t ThreadsWithWork(int64_t blocks, int threads) {
  for (int64_t d = std::min<int64_t>(threads, blocks); d > 1; --d)
    if (blocks % d == 0) return d;
  return 1;
}

}  // namespace

ProductShape BrgemmProduct::At(int64_t micro_batch) const {
  return {.batch = grows == Grows::kBatch ? batch * micro_batch : batch,
          .rows = grows == Grows::kRows ? rows * micro_batch : rows,
          .inner = grows == Grows::kInner ? inner * micro_batch : inner,
          .cols = cols,
          .transposed_first = transposed_first,
          .transposed_second = transposed_second,
          .threads = threads};
}

int64_t BrgemmProduct::ScratchBytes(int64_t micro_batch) const {
  if (!valid()) return 0;
  return kernel == CpuBf16::kAmx ? AmxScratchBytes(At(micro_batch))
                                 : Avx512Bf16ScratchBytes(At(micro_batch));
}

// oneDNN's AVX512-BF16 brgemm, measured with torch.profiler around single mm, addmm,
// linear and bmm calls (torch 2.15, an AVX512-BF16 AMD EPYC): exact at 1 and 2 threads on
// every shape tried within the limits below, and at 4 on the linears tried; not at 3,
// where oneDNN chooses other blocks. The product is cut into blocks of up to 256 rows x
// 64 columns:
//  - each thread with work has an fp32 block (up to 256 x 64); the threads with work are
//    the largest divisor of the number of blocks that is at most the thread count;
//  - every thread books a bf16 panel of 64 x the inner dimension, clamped to [32, 512];
//  - plus 1 KiB, and 640 B for each further thread;
//  - with its first operand transposed (a weight gradient, the tokens inner) oneDNN also
//    copies each thread's block of rows of it, spreads only the row blocks over threads,
//    and books 128 B more. Exact up to 256 tokens; past that it blocks the inner
//    dimension in ways not measured enough to model, and nothing is counted.
int64_t Avx512Bf16ScratchBytes(const ProductShape& p) {
  constexpr int64_t kBlockRows = 256, kBlockCols = 64;
  const int64_t m = p.rows, k = p.inner;
  const int64_t block = std::min(m, kBlockRows) * std::min(p.cols, kBlockCols);
  const int64_t panels = kBlockCols * std::clamp<int64_t>(k, 32, 512) * 2 * p.threads;
  const int64_t fixed = 1024 + 640 * (p.threads - 1);
  const int64_t row_blocks = CeilDiv(m, kBlockRows);
  if (!p.transposed_first) {
    const int64_t blocks = p.batch * row_blocks * CeilDiv(p.cols, kBlockCols);
    return block * 4 * ThreadsWithWork(blocks, p.threads) + panels + fixed;
  }
  if (k > kBlockRows) return 0;  // not modelled (see above)
  const int64_t copy = std::min(m, kBlockRows) * k * 2;
  return (block * 4 + copy) * ThreadsWithWork(row_blocks, p.threads) + panels + fixed + 128;
}

// oneDNN's AMX brgemm, measured with torch.profiler around single linear, mm, input and
// weight gradient and bmm calls (torch 2.15 with oneDNN v3.13.3, an Intel Xeon whose
// kernel is brg_matmul:avx10_1_512_amx; tests/data/onednn-amx-scratch.tsv, 1 and 2
// threads, 12 shapes): the bookings oneDNN's own blocking search makes, which
// onednn_amx_blocking.h follows; exact on all 120 rows.
//  - ATen keeps a product from oneDNN when m * k * n (times the batch) is at most 16^3 and
//    runs its own gemm, which allocates nothing (measured: [16, 16] x [16, 16] books 0 B,
//    [16, 16] x [16, 17] 6,208 B);
//  - a vector operand (m or n of 1) takes oneDNN's GEMV path, in its AVX512-BF16 kernel:
//    bounded by that kernel's rule (its GEMV path measured below it: [1, 64] x [64, 512]
//    books 1,920 B at 1 thread and 3,584 B at 2, the rule 9,472 and 18,560 B);
//  - what the port does not follow (no AMX blocking found, tiles past the registers) is
//    bounded the same way plus a copy of each operand, every tile and an fp32 C per
//    thread, larger than anything oneDNN books for the product.
int64_t AmxScratchBytes(const ProductShape& p) {
  constexpr int64_t kAtenGemmMaxVolume = 16 * 16 * 16;  // aten/src/ATen/native/mkldnn/Matmul.cpp
  if (p.batch * p.rows * p.inner * p.cols <= kAtenGemmMaxVolume) return 0;
  const AmxScratchpad s = AmxScratchpadOf(p.batch, p.rows, p.inner, p.cols, p.transposed_first,
                                          p.transposed_second, p.threads);
  if (s.modelled) return s.Bytes();
  const int64_t avx512 = Avx512Bf16ScratchBytes(p);
  if (p.rows == 1 || p.cols == 1) return avx512;
  const int64_t m = RoundUp(p.rows, 64), k = RoundUp(p.inner, 32) + 32, n = RoundUp(p.cols, 64);
  const int64_t per_thread = 2 * k * n + 2 * m * k + 4 * m * n + 8 * 1024 + 640 * CeilDiv(k, 32);
  return avx512 + 5 * 128 + p.threads * per_thread;
}

}  // namespace headroom
