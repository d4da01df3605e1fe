// How oneDNN v3.13 blocks one bf16 x bf16 -> bf16 matrix product on an AMX CPU
// (brg_matmul:avx10_1_512_amx, fp32 accumulation, no post-ops; a bias books nothing more),
// and the scratchpad that blocking books: a port of its brgemm matmul configuration
// (brgemm_matmul_utils.cpp, amx_blocking_heuristics.cpp, brgemm_utils.cpp). The caches are
// those of Intel's AMX server CPUs (see internal/onednn_amx_conf.h).
// Exact on every row of tests/data/onednn-amx-scratch.tsv (1 and 2 threads).
#pragma once

#include "planner/simulate/layer.h"

#include <cstdint>

namespace headroom {

// Why a product's scratchpad is not modelled: oneDNN runs something this port does not
// follow, and the caller must refuse or bound it.
enum class AmxNotModelled {
  kNone,
  kBadShape,      // a dimension or the thread count is not positive
  kGemv,          // M or N is 1: oneDNN's GEMV path runs instead (brg_matmul:avx512_core_bf16)
  kNoBlocking,    // no blocking scores above 0: oneDNN declines the kernel
  kTileOverflow,  // a kernel's tiles exceed the 8 AMX registers: oneDNN fails to build it
};

struct AmxBlocking {
  enum class Heuristic { kMacroSmallDims, kMacroGrid, kMicro };

  int64_t batch = 1, m = 0, k = 0, n = 0;
  AmxNotModelled not_modelled = AmxNotModelled::kNone;
  Heuristic heuristic = Heuristic::kMicro;
  int nthr = 1;  // threads given work (may be fewer than asked)
  int nthr_m = 1, nthr_n = 1, nthr_k = 1, nthr_b = 1;
  int64_t m_blk = 0, n_blk = 0, k_blk = 0;        // one brgemm call's C block and K block
  int64_t m_chunk = 1, n_chunk = 1, k_chunk = 1;  // blocks per thread's chunk
  int64_t batch_size = 1;                         // K blocks per brgemm call
  int64_t m_tail = 0, n_tail = 0, k_tail = 0;
  bool buffer_a = false;  // A copied per thread (a transposed A, or to pad K)
  bool buffer_c = false;  // fp32 partial sums per thread
  bool horizontal = false, extendable_k = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int c_tiles = 0;  // C tiles of the kernel with the most
  // Bytes per thread of the largest kernel's workspace: its C tiles, a tile for an extended
  // K tail, a fused copy of A (followed from the source; no measured row exercises the
  // last two).
  int64_t tile_workspace = 0;

  bool modelled() const { return not_modelled == AmxNotModelled::kNone; }
};

// The scratchpad's bookings (init_scratchpad), bytes over all threads.
struct AmxScratchpad {
  bool modelled = true;  // false: every booking is 0 (see AmxBlocking::not_modelled)
  int64_t batch_list = 0, buffer_a = 0, buffer_b = 0, buffer_c = 0, tiles = 0;

  // What the scratchpad allocates: each booking with its 128 bytes of alignment slack
  // (memory_tracking.hpp), an empty one nothing.
  int64_t Bytes() const;
};

// `batch` independent M x K by K x N products (B is not broadcast: oneDNN would fold the
// batch into M), A transposed (a weight gradient, the tokens inner), B transposed (F.linear's
// W^T), on `threads` threads. Filled in also when not modelled, for inspection.
AmxBlocking ChooseAmxBlocking(int64_t batch, int64_t m, int64_t k, int64_t n, bool transposed_a,
                              bool transposed_b, int threads);
// What `blocking` books, modelled or not (the raw port, for tests).
AmxScratchpad AmxBookingsOf(const AmxBlocking& blocking);
// The scratchpad oneDNN books for the product; all zeros with modelled false when not
// modelled. Memoized per argument tuple (thread-safe).
AmxScratchpad AmxScratchpadOf(int64_t batch, int64_t m, int64_t k, int64_t n, bool transposed_a,
                              bool transposed_b, int threads);

}  // namespace headroom
