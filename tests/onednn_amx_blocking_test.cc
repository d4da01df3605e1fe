// The port of oneDNN v3.13's AMX bf16 matmul blocking on handpicked shapes, each checked
// against the scratch torch.profiler measured on an AMX Xeon
// (tests/data/onednn-amx-scratch.tsv). Shapes as oneDNN sees them: M x K by K x N.
#include <gtest/gtest.h>

#include "planner/simulate/onednn_amx_blocking.h"

namespace headroom {
namespace {

using Heuristic = AmxBlocking::Heuristic;

// F.linear: x [m, k] @ W^T, W stored [n, k] (B transposed).
AmxBlocking LinearBlocking(int64_t m, int64_t k, int64_t n, int threads) {
  return ChooseAmxBlocking(1, m, k, n, false, true, threads);
}

int64_t BytesOf(const AmxBlocking& b) { return AmxBookingsOf(b).Bytes(); }

TEST(OnednnAmxBlocking, LinearWithFewRowsWalksCVertically) {
  // 128 rows fit one vertical strip: the whole M in one block, B in one 32-wide block at a
  // time (8 of them per chunk), K whole. Per thread: batch list 640, B copy 32 x 64 bf16,
  // 4 C tiles (2x2).
  const AmxBlocking b = LinearBlocking(128, 64, 256, 1);
  EXPECT_EQ(b.heuristic, Heuristic::kMacroGrid);
  EXPECT_FALSE(b.horizontal);
  EXPECT_EQ(b.m_blk, 128);
  EXPECT_EQ(b.n_blk, 32);
  EXPECT_EQ(b.n_chunk, 8);
  EXPECT_EQ(b.k_blk, 64);
  EXPECT_FALSE(b.buffer_c);
  EXPECT_EQ(b.c_tiles, 4);
  EXPECT_EQ(BytesOf(b), 9'216);
}

TEST(OnednnAmxBlocking, SmallInputGradientLeavesTheSecondThreadIdle) {
  // dY [128, 256] @ W [256, 64]: the cost model scores one thread above every split of
  // two (the work is small), walking C horizontally in 32-row blocks over all 64 columns.
  const AmxBlocking b = ChooseAmxBlocking(1, 128, 256, 64, false, false, 2);
  EXPECT_EQ(b.nthr, 1);
  EXPECT_TRUE(b.horizontal);
  EXPECT_EQ(b.m_blk, 32);
  EXPECT_EQ(b.m_chunk, 4);
  EXPECT_EQ(b.n_blk, 64);
  EXPECT_EQ(BytesOf(b), 37'888);
}

TEST(OnednnAmxBlocking, TwoThreadsSplitTheRowsOfABigLinear) {
  // Each thread walks its 1024 rows horizontally over all 768 columns; no K blocking, so
  // no fp32 C buffer, and each thread copies all of B (768 x 768 bf16).
  const AmxBlocking b = LinearBlocking(2048, 768, 768, 2);
  EXPECT_EQ(b.nthr, 2);
  EXPECT_EQ(b.nthr_m, 2);
  EXPECT_TRUE(b.horizontal);
  EXPECT_EQ(b.n_blk, 768);
  EXPECT_FALSE(b.buffer_c);
  EXPECT_EQ(BytesOf(b), 2'369'152);
}

TEST(OnednnAmxBlocking, BatchedProductBlocksKAndKeepsPartialSums) {
  // 4 x [256, 768] @ [768, 3072] on one thread: N in blocks of 448 (a tail of 384), K in
  // two blocks of 384, so partial sums go to an fp32 buffer of 256 x 448.
  const AmxBlocking b = ChooseAmxBlocking(4, 256, 768, 3072, false, false, 1);
  EXPECT_EQ(b.heuristic, Heuristic::kMacroGrid);
  EXPECT_EQ(b.n_blk, 448);
  EXPECT_EQ(b.n_tail, 384);
  EXPECT_EQ(b.k_blk, 384);
  EXPECT_TRUE(b.buffer_c);
  EXPECT_EQ(BytesOf(b), 808'064);
}

TEST(OnednnAmxBlocking, WeightGradientTakesTheMicroHeuristicAndCopiesA) {
  // dY^T [32, 64] @ x [64, 32]: A is transposed (the tokens inner), which the macro
  // heuristic does not take; the micro one copies A (32 x 64) and B (64-wide N block).
  const AmxBlocking b = ChooseAmxBlocking(1, 32, 64, 32, true, false, 1);
  EXPECT_EQ(b.heuristic, Heuristic::kMicro);
  EXPECT_TRUE(b.buffer_a);
  EXPECT_EQ(b.ldb, 64);
  EXPECT_EQ(BytesOf(b), 17'536);
  // The same at scale, on two threads.
  EXPECT_EQ(AmxScratchpadOf(1, 768, 2048, 768, true, false, 2).Bytes(), 1'476'480);
}

TEST(OnednnAmxBlocking, ScratchpadOfIsTheMemoizedBookings) {
  const AmxScratchpad first = AmxScratchpadOf(1, 1024, 256, 256, false, true, 2);
  const AmxScratchpad again = AmxScratchpadOf(1, 1024, 256, 256, false, true, 2);
  EXPECT_TRUE(first.modelled);
  EXPECT_EQ(first.Bytes(), 272'000);
  EXPECT_EQ(again.Bytes(), first.Bytes());
  // Five bookings, each with 128 bytes of slack; an empty one books nothing.
  const AmxScratchpad s{.batch_list = 1, .buffer_a = 0, .buffer_b = 2, .buffer_c = 0, .tiles = 3};
  EXPECT_EQ(s.Bytes(), 6 + 3 * 128);
}

TEST(OnednnAmxBlocking, ShapesOutsideThePortAreFlaggedNotModelled) {
  // A vector operand goes to oneDNN's GEMV kernel, not this one.
  EXPECT_EQ(LinearBlocking(1, 64, 64, 1).not_modelled, AmxNotModelled::kGemv);
  EXPECT_EQ(ChooseAmxBlocking(1, 64, 64, 1, false, false, 1).not_modelled, AmxNotModelled::kGemv);
  EXPECT_EQ(LinearBlocking(0, 64, 64, 1).not_modelled, AmxNotModelled::kBadShape);
  const AmxScratchpad gemv = AmxScratchpadOf(1, 1, 64, 64, false, true, 1);
  EXPECT_FALSE(gemv.modelled);
  EXPECT_EQ(gemv.Bytes(), 0);
}

TEST(OnednnAmxBlocking, AnExtendedKTailReadsIntoATileMore) {
  // K = 176 is one block of 176, extended past K (not a whole 32-row tile): the brgemm
  // kernel's workspace has its 4 C tiles and one tile more (brgemm_types.hpp,
  // get_wsp_buffer_size with amx_wary_k_tail). By hand, on one thread: a 640-byte batch
  // list, B's block 192 x 64 bf16 (24,576) and 5 tiles (5,120), each booking + 128.
  const AmxBlocking b = LinearBlocking(64, 176, 64, 1);
  EXPECT_TRUE(b.modelled());
  EXPECT_TRUE(b.extendable_k);
  EXPECT_EQ(b.tile_workspace, 5 * 1024);
  EXPECT_EQ(AmxBookingsOf(b).Bytes(), 640 + 24'576 + 5'120 + 3 * 128);
}

}  // namespace
}  // namespace headroom
