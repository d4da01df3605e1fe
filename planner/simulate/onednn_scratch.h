// The scratchpad oneDNN books for one bf16 matrix product on the CPU, by kernel. oneDNN's
// brgemm matmul allocates it per call (the primitive's scratchpad, torch's user mode) and
// frees it before the call returns, so it sits beside the product's output. Each kernel's
// rule is in onednn_scratch.cc, with what it was measured on and what it covers.
// Costs are tabulated at micro-batch 1, and these sizes are not proportional to the
// micro-batch (oneDNN's blocks stop growing), so the product's shape is kept instead.
#pragma once

#include "planner/core/training_stack.h"
#include "planner/simulate/layer.h"

#include <cstdint>

namespace headroom {

// One product of `batch` matrices, [rows, inner] x [inner, cols], as oneDNN sees it.
struct ProductShape {
  int64_t batch = 1;
  int64_t rows = 0, inner = 0, cols = 0;
  bool transposed_first = false;   // A's rows are strided (a weight gradient: dY^T @ x)
  bool transposed_second = false;  // B is a transposed view (F.linear's W^T, k^T)
  int threads = 1;
};

// oneDNN's AVX512-BF16 brgemm (brg_matmul:avx512_core_bf16).
int64_t Avx512Bf16ScratchBytes(const ProductShape& p);
// oneDNN's AMX brgemm (brg_matmul:avx10_1_512_amx, i.e. avx512_core_amx).
int64_t AmxScratchBytes(const ProductShape& p);

struct BrgemmProduct {
  enum class Grows { kRows, kBatch, kInner };  // the dimension the micro-batch multiplies
  CpuBf16 kernel = CpuBf16::kAvx512Bf16;       // kAvx512Bf16 or kAmx
  int64_t batch = 1;
  int64_t rows = 0;  // at micro-batch 1; 0: no such product
  int64_t inner = 0;
  int64_t cols = 0;
  Grows grows = Grows::kRows;
  bool transposed_first = false;
  bool transposed_second = false;
  int threads = 1;

  bool valid() const { return rows > 0; }
  ProductShape At(int64_t micro_batch) const;
  int64_t ScratchBytes(int64_t micro_batch) const;
};

}  // namespace headroom
