// oneDNN's scratchpad rules against sizes torch.profiler measured around single bf16
// products (torch 2.15, 2026-12-03): the scratch allocation each mm / linear / bmm made,
// besides its output. AVX512-BF16 on an AMD EPYC; AMX on an Intel Xeon, every row of
// tests/data/onednn-amx-scratch.tsv (tests/reference/onednn_scratch_probe.py's table).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "planner/simulate/onednn_scratch.h"

namespace headroom {
namespace {

using Grows = BrgemmProduct::Grows;

// x [rows, inner] @ W^T -> [rows, cols] (a linear, or an input gradient's dY @ W).
BrgemmProduct Linear(int64_t rows, int64_t inner, int64_t cols, int threads) {
  return {.rows = rows, .inner = inner, .cols = cols, .threads = threads};
}

TEST(OnednnScratch, LinearsMatchTheProfilerAtOneTwoAndFourThreads) {
  EXPECT_EQ(Linear(64, 256, 64, 1).ScratchBytes(1), 50'176);
  EXPECT_EQ(Linear(64, 256, 64, 2).ScratchBytes(1), 83'584);  // one block: one fp32 block
  EXPECT_EQ(Linear(256, 64, 256, 2).ScratchBytes(1), 149'120);
  EXPECT_EQ(Linear(64, 64, 192, 2).ScratchBytes(1), 34'432);  // 3 blocks share no divisor
  EXPECT_EQ(Linear(512, 64, 192, 2).ScratchBytes(1), 149'120);
  EXPECT_EQ(Linear(64, 64, 8, 1).ScratchBytes(1), 11'264);  // narrow output: a narrow block
  EXPECT_EQ(Linear(64, 8, 64, 1).ScratchBytes(1), 21'504);  // the panel is at least 32 deep
  EXPECT_EQ(Linear(2048, 768, 768, 1).ScratchBytes(1), 132'096);
  EXPECT_EQ(Linear(2048, 768, 768, 4).ScratchBytes(1), 527'232);
  EXPECT_EQ(Linear(256, 64, 128, 4).ScratchBytes(1), 166'784);
}

TEST(OnednnScratch, TheMicroBatchMultipliesTheRowsNotTheBytes) {
  // Tabulated at micro-batch 1 (64 tokens), run at 4: the [256, 64, 256] product above.
  EXPECT_EQ(Linear(64, 64, 256, 2).ScratchBytes(4), 149'120);
  EXPECT_NE(Linear(64, 64, 256, 2).ScratchBytes(4), 4 * Linear(64, 64, 256, 2).ScratchBytes(1));
}

TEST(OnednnScratch, BatchedProductsMatchTheProfiler) {
  auto bmm = [](int64_t batch, int64_t rows, int64_t inner, int64_t cols, int threads) {
    return BrgemmProduct{.batch = batch,
                         .rows = rows,
                         .inner = inner,
                         .cols = cols,
                         .grows = Grows::kBatch,
                         .threads = threads}
        .ScratchBytes(1);
  };
  EXPECT_EQ(bmm(8, 64, 16, 64, 1), 21'504);
  EXPECT_EQ(bmm(8, 64, 64, 16, 1), 13'312);
  EXPECT_EQ(bmm(8, 64, 16, 64, 2), 42'624);
  EXPECT_EQ(bmm(1, 64, 16, 64, 2), 26'240);
  EXPECT_EQ(bmm(16, 512, 64, 512, 2), 149'120);
}

TEST(OnednnScratch, WeightGradientsCopyTheTransposedOperand) {
  // x^T @ dY: [rows, tokens] x [tokens, cols], the tokens growing with the micro-batch.
  auto grad = [](int64_t rows, int64_t tokens, int64_t cols, int threads) {
    return BrgemmProduct{.rows = rows,
                         .inner = tokens,
                         .cols = cols,
                         .grows = Grows::kInner,
                         .transposed_first = true,
                         .threads = threads}
        .ScratchBytes(1);
  };
  EXPECT_EQ(grad(256, 256, 64, 1), 230'528);
  EXPECT_EQ(grad(256, 256, 64, 2), 263'936);
  EXPECT_EQ(grad(64, 128, 256, 2), 67'328);
  EXPECT_EQ(grad(512, 64, 256, 2), 214'784);  // two row blocks, one per thread
  EXPECT_EQ(grad(1024, 256, 256, 2), 460'544);
  // Past 256 tokens oneDNN blocks them in ways not modelled (410,752 B measured at 512):
  // nothing is counted, rather than a guess.
  EXPECT_EQ(grad(256, 512, 64, 1), 0);
}

struct MeasuredRow {
  int threads = 0;
  std::string op;
  int64_t m = 0, k = 0, n = 0, output_bytes = 0, scratch_bytes = 0;
  std::string Name() const {
    return std::to_string(threads) + " thread(s) " + op + " m=" + std::to_string(m) +
           " k=" + std::to_string(k) + " n=" + std::to_string(n);
  }
};

std::vector<MeasuredRow> ReadTable(const std::string& path) {
  std::ifstream in(path);
  std::vector<MeasuredRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.starts_with("threads")) continue;
    std::istringstream fields(line);
    MeasuredRow r;
    fields >> r.threads >> r.op >> r.m >> r.k >> r.n >> r.output_bytes >> r.scratch_bytes;
    if (fields) rows.push_back(r);
  }
  return rows;
}

// The probe's calls as oneDNN sees them: F.linear(a, w) and a @ w.t() multiply by the
// transposed view of w [n, k]; g @ w is [m, n] x [n, k] with w plain; g.t() @ a is
// [n, m] x [m, k], its first operand transposed; bmm4 multiplies contiguous matrices.
ProductShape ShapeOf(const MeasuredRow& r) {
  ProductShape p{.threads = r.threads};
  if (r.op == "linear" || r.op == "mm") {
    p.rows = r.m, p.inner = r.k, p.cols = r.n, p.transposed_second = true;
  } else if (r.op == "grad_input") {
    p.rows = r.m, p.inner = r.n, p.cols = r.k;
  } else if (r.op == "grad_weight") {
    p.rows = r.n, p.inner = r.m, p.cols = r.k, p.transposed_first = true;
  } else if (r.op == "bmm4") {
    p.batch = 4, p.rows = r.m, p.inner = r.k, p.cols = r.n;
  }
  return p;
}

TEST(OnednnScratch, AmxRuleMatchesEveryMeasuredRow) {
  const auto rows = ReadTable(std::string(HEADROOM_TEST_DATA_DIR) + "/onednn-amx-scratch.tsv");
  ASSERT_EQ(rows.size(), 120u);  // 2 thread counts x 5 ops x 12 shapes
  int exact = 0;
  for (const MeasuredRow& r : rows) {
    ASSERT_GT(ShapeOf(r).rows, 0) << "unknown op in the table: " << r.op;
    const int64_t rule = AmxScratchBytes(ShapeOf(r));
    EXPECT_EQ(rule, r.scratch_bytes) << r.Name();
    exact += rule == r.scratch_bytes;
  }
  EXPECT_EQ(exact, 120);  // the rule misses no row (docs/reference-suite.md)
}

TEST(OnednnScratch, AmxProductsGrowWithTheMicroBatchAsMeasured) {
  // Tabulated at micro-batch 1 (64 tokens): F.linear [64, 64] x [64, 64]^T at micro-batch
  // 2 is the measured 128 x 64 x 64 linear; its transposed-A weight gradient at 2 (the
  // tokens inner) is the measured grad_weight over 128 tokens.
  const BrgemmProduct linear{.kernel = CpuBf16::kAmx,
                             .rows = 64,
                             .inner = 64,
                             .cols = 64,
                             .transposed_second = true,
                             .threads = 1};
  EXPECT_EQ(linear.ScratchBytes(2), 13'312);
  const BrgemmProduct weight_grad{.kernel = CpuBf16::kAmx,
                                  .rows = 64,
                                  .inner = 64,
                                  .cols = 64,
                                  .grows = Grows::kInner,
                                  .transposed_first = true,
                                  .threads = 2};
  EXPECT_EQ(weight_grad.ScratchBytes(2), 59'136);
  // The same product on the AVX512-BF16 kernel books its own, different scratchpad.
  BrgemmProduct avx512 = linear;
  avx512.kernel = CpuBf16::kAvx512Bf16;
  EXPECT_NE(avx512.ScratchBytes(2), linear.ScratchBytes(2));
}

}  // namespace
}  // namespace headroom
