// The scratchpad oneDNN's AVX512-BF16 brgemm matmul books for one bf16 product on the
// CPU, measured with torch.profiler around single mm, addmm, linear and bmm calls (torch
// 2.15, an AVX512-BF16 AMD EPYC): exact at 1 and 2 threads on every shape tried within
// the limits below, and at 4 on the linears tried; not at 3, where oneDNN chooses other
// blocks. The product is `batch` matrices of [rows, inner] x [inner, cols], cut into
// blocks of up to 256 rows x 64 columns:
//  - each thread with work has an fp32 block (up to 256 x 64); the threads with work are
//    the largest divisor of the number of blocks that is at most the thread count;
//  - every thread books a bf16 panel of 64 x the inner dimension, clamped to [32, 512];
//  - plus 1 KiB, and 640 B for each further thread;
//  - with its first operand transposed (a weight gradient, the tokens inner) oneDNN also
//    copies each thread's block of rows of it, spreads only the row blocks over threads,
//    and books 128 B more. Exact up to 256 tokens; past that it blocks the inner
//    dimension in ways not measured enough to model, and nothing is counted.
// Costs are tabulated at micro-batch 1, and this size is not proportional to the
// micro-batch (blocks stop at 256 rows), so the product's shape is kept instead.
#pragma once

#include "planner/simulate/layer.h"

#include <algorithm>
#include <cstdint>

namespace headroom {

struct BrgemmProduct {
  enum class Grows { kRows, kBatch, kInner };  // the dimension the micro-batch multiplies
  int64_t batch = 1;
  int64_t rows = 0;  // at micro-batch 1; 0: no such product
  int64_t inner = 0;
  int64_t cols = 0;
  Grows grows = Grows::kRows;
  bool transposed_first = false;
  int threads = 1;

  bool valid() const { return rows > 0; }

  int64_t ScratchBytes(int64_t micro_batch) const {
    if (!valid()) return 0;
    const int64_t b = grows == Grows::kBatch ? batch * micro_batch : batch;
    const int64_t m = grows == Grows::kRows ? rows * micro_batch : rows;
    const int64_t k = grows == Grows::kInner ? inner * micro_batch : inner;
    const int64_t block = std::min<int64_t>(m, kBlockRows) * std::min<int64_t>(cols, kBlockCols);
    const int64_t panels = kBlockCols * std::clamp<int64_t>(k, 32, 512) * 2 * threads;
    const int64_t fixed = 1024 + 640 * (threads - 1);
    const int64_t row_blocks = CeilDiv(m, kBlockRows);
    if (!transposed_first) {
      const int64_t blocks = b * row_blocks * CeilDiv(cols, kBlockCols);
      return block * 4 * ThreadsWithWork(blocks) + panels + fixed;
    }
    if (k > kBlockRows) return 0;  // not modelled (see above)
    const int64_t copy = std::min<int64_t>(m, kBlockRows) * k * 2;
    return (block * 4 + copy) * ThreadsWithWork(row_blocks) + panels + fixed + 128;
  }

 private:
  static constexpr int64_t kBlockRows = 256, kBlockCols = 64;
  static constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
  int64_t ThreadsWithWork(int64_t blocks) const {
    for (int64_t d = std::min<int64_t>(threads, blocks); d > 1; --d)
      if (blocks % d == 0) return d;
    return 1;
  }
};

}  // namespace headroom
