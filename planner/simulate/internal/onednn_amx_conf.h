// The pieces of the AMX bf16 matmul port (onednn_amx_*.cc) that the files share: the few
// fields of oneDNN v3.13's brgemm_matmul_conf_t a bf16 x bf16 -> bf16 product sets, and the
// blocking its two heuristics return. Private to planner/simulate/.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>

namespace headroom::amx {

// bf16 operands and output, fp32 accumulation (brgemm_matmul_conf_t's *_dt_sz).
constexpr int64_t kBf16Bytes = 2;
constexpr int64_t kAccBytes = 4;
constexpr int64_t kVnni = 2;              // data_type_vnni_granularity(bf16)
constexpr int64_t kWeiKBlk = 16 * kVnni;  // get_wei_k_blk: a tile row of K
constexpr int64_t kTileBytes = 1024;      // one AMX tile register

// Per-core caches of Intel's AMX server CPUs (Sapphire, Emerald and Granite Rapids): 48 KiB
// L1d, 2 MiB 16-way L2, 64-byte lines. oneDNN reads them from the CPU; the measured
// machine's scratch sizes fit only these.
constexpr int64_t kL1Bytes = 48 * 1024;
constexpr int64_t kL2Bytes = 2048 * 1024;
constexpr int64_t kL2Ways = 16;
constexpr int64_t kCacheLine = 64;
// amx_blocking_heuristics.cpp, L1_threshold / L2_threshold / L2_ways_threshold.
constexpr int64_t kL1Threshold = 5 * kL1Bytes / 6;
constexpr int64_t kL2Threshold = 3 * kL2Bytes / 4;
constexpr int64_t kL2WaysThreshold = 3 * kL2Ways / 4;

constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }
constexpr int64_t RoundDown(int64_t a, int64_t b) { return a / b * b; }
constexpr bool IsPow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

// What init_brgemm_matmul_conf has set when compute_blocking_heuristic runs.
struct Conf {
  int64_t m = 0, k = 0, n = 0, batch = 1;
  bool transposed_a = false, transposed_b = false;
  int nthr = 1;
  bool use_buffer_a = false;  // is_copy_a_required: a transposed A is copied
  int64_t wei_n_blk = 32;     // get_default_n_block: 32 with the macro heuristic, else 64
  int64_t user_lda = 0;       // A's leading dimension as given (A_strides / a_dt_sz)
  bool lda_big_pow2 = false;  // brgemm_matmul_conf_t::lda_big_pow2
};

// matmul_amx_blocking_params_t's fields that update_configuration copies back.
struct Choice {
  int nthr = 1, nthr_m = 1, nthr_n = 1, nthr_k = 1, nthr_b = 1;
  int64_t m_blk = 0, m_chunk = 1, n_blk = 0, n_chunk = 1, k_blk = 0, k_chunk = 1;
  int64_t batch_size = 0;  // brgemm_batch_size
  int64_t lda = 0;
  bool buffer_a = false, buffer_c = false, extendable_k = false, fused_copy_a = false;
  bool horizontal = false;  // the macro heuristic's traversal
  bool small_dims = false;  // the macro heuristic's small-dims shortcut chose it
  float score = 0.0f;       // 0: no blocking found
};

// matmul_amx_blocking_params_macro_t::is_supported for this conf: bf16, plain A.
inline bool MacroSupported(const Conf& conf) { return !conf.transposed_a; }

// matmul_amx_blocking_params_macro_t::find_best_blocking: the small-dims shortcuts, else the
// grid over thread splits; score 0 when neither finds a blocking.
Choice FindMacroBlocking(const Conf& conf);
// compute_blocking_heuristic's fallback: the starting blocks, then
// matmul_amx_blocking_params_micro_t::find_best_blocking.
Choice FindMicroBlocking(const Conf& conf);
// brgemm_blocking_tmm: the tile registers one brgemm kernel of bd rows x ld columns,
// reducing over reduce_dim, decomposes into (bf16, the AMX micro-kernel).
struct KernelTiles {
  int c_tiles = 0;
  bool fits = true;  // false: A, B and C tiles exceed the 8 registers (oneDNN fails)
};
KernelTiles TilesOf(int64_t bd, int64_t ld, int64_t reduce_dim);

}  // namespace headroom::amx
