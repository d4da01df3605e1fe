// oneDNN v3.13's brgemm matmul set-up for a bf16 product on AMX around the two blocking
// heuristics (onednn_amx_macro.cc, onednn_amx_micro.cc): the conf (init_brgemm_matmul_conf),
// the heuristic's choice (compute_blocking_heuristic), tails and leading dimensions, the
// kernels' tiles (brgemm_matmul.cpp, pd_t::init), the per-thread sizes (init_aux_values) and
// the bookings (init_scratchpad).
// Not covered, as a bf16 product from PyTorch never takes them: post-ops beyond a bias, zero
// points and scales, runtime dims, int8 and other types, a B in a blocked layout, a batch
// broadcast over B (folded into M). update_and_check_B_tag compares the adjusted N block
// with itself, so a changed N block never makes oneDNN decline.
#include "planner/simulate/onednn_amx_blocking.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "planner/simulate/internal/onednn_amx_conf.h"

namespace headroom {
namespace {

// The size of a brgemm_batch_element_t, one per K block of a brgemm call, 16 per thread.
constexpr int64_t kBatchElementBytes = 40;
constexpr int64_t kBatchElementsPerBlock = 16;
// memory_tracking.hpp, registrar_t::book: each booking's alignment slack.
constexpr int64_t kBookingSlack = 128;

// init_brgemm_matmul_conf: what the heuristics read.
amx::Conf MakeConf(int64_t batch, int64_t m, int64_t k, int64_t n, bool transposed_a,
                   bool transposed_b, int threads) {
  amx::Conf conf{.m = m,
                 .k = k,
                 .n = n,
                 .batch = batch,
                 .transposed_a = transposed_a,
                 .transposed_b = transposed_b,
                 .nthr = threads};
  conf.use_buffer_a = transposed_a;  // is_copy_a_required
  conf.wei_n_blk = amx::MacroSupported(conf) ? 32 : 64;
  conf.user_lda = transposed_a ? m : k;
  conf.lda_big_pow2 = !transposed_a && amx::IsPow2(k) && k >= 8192 / amx::kBf16Bytes;
  return conf;
}

void CopyChoice(const amx::Choice& c, AmxBlocking& b) {
  b.nthr = c.nthr;
  b.nthr_m = c.nthr_m;
  b.nthr_n = c.nthr_n;
  b.nthr_k = c.nthr_k;
  b.nthr_b = c.nthr_b;
  b.m_blk = c.m_blk;
  b.n_blk = c.n_blk;
  b.k_blk = c.k_blk;
  b.m_chunk = c.m_chunk;
  b.n_chunk = c.n_chunk;
  b.k_chunk = c.k_chunk;
  b.batch_size = c.batch_size;
  b.buffer_a = c.buffer_a;
  b.buffer_c = c.buffer_c;
  b.horizontal = c.horizontal;
  b.extendable_k = c.extendable_k;
  b.lda = c.lda;
}

// compute_blocking_heuristic: the macro heuristic where it applies and finds a blocking,
// else the micro one.
amx::Choice ChooseHeuristic(const amx::Conf& conf, AmxBlocking& b) {
  if (amx::MacroSupported(conf)) {
    const amx::Choice macro = amx::FindMacroBlocking(conf);
    if (macro.score != 0.0f) {
      b.heuristic = macro.small_dims ? AmxBlocking::Heuristic::kMacroSmallDims
                                     : AmxBlocking::Heuristic::kMacroGrid;
      return macro;
    }
  }
  b.heuristic = AmxBlocking::Heuristic::kMicro;
  const amx::Choice micro = amx::FindMicroBlocking(conf);
  if (micro.score == 0.0f) b.not_modelled = AmxNotModelled::kNoBlocking;
  return micro;
}

// init_brgemm_matmul_conf after the heuristic: B's N block follows a narrower N_blk (to
// whole 16-column groups, a copy kernel's zmm of bf16 pairs); tails; leading dimensions.
void SetTailsAndLeadingDims(const amx::Conf& conf, const amx::Choice& c, AmxBlocking& b) {
  int64_t wei_n_blk = conf.wei_n_blk;
  if (wei_n_blk > b.n_blk && b.n != b.n_blk)
    wei_n_blk = amx::RoundUp(b.n_blk, amx::kCacheLine / (amx::kVnni * amx::kBf16Bytes));
  b.m_tail = b.m % b.m_blk;
  b.n_tail = b.n % b.n_blk;
  if (b.k > b.k_blk) {
    b.k_tail =
        b.extendable_k || c.fused_copy_a ? b.k % b.k_blk : amx::RoundUp(b.k % b.k_blk, amx::kVnni);
  }
  b.ldb = wei_n_blk;  // get_actual_LDB: blocked on AMX
  b.ldc = b.buffer_c && b.nthr_k <= 1 ? std::min<int64_t>(32, b.n_blk) : b.n;
}

// brgemm_matmul.cpp, pd_t::init: one kernel per (M block or tail, N block or tail, K block
// or tail); the tile workspace per thread is the largest kernel's (get_wsp_buffer_size): its
// C tiles, one tile more where an extended K tail reads past K (amx_wary_k_tail), and the
// fused copy of A's block (get_fused_copy_a_wsp_buffer_size: max_bs x rows x K to 32).
void SetTiles(const amx::Choice& c, AmxBlocking& b) {
  const int64_t ms[] = {b.m_blk, b.m_tail}, ns[] = {b.n_blk, b.n_tail}, ks[] = {b.k_blk, b.k_tail};
  bool fits = true;
  for (const int64_t vm : ms) {
    for (const int64_t vn : ns) {
      for (const int64_t vk : ks) {
        if (vm == 0 || vn == 0 || vk == 0) continue;
        const amx::KernelTiles tiles = amx::TilesOf(vm, vn, vk);
        b.c_tiles = std::max(b.c_tiles, tiles.c_tiles);
        fits = fits && tiles.fits;
        const bool wary_k_tail =
            b.extendable_k &&
            (vk % amx::kVnni != 0 || (vk > amx::kWeiKBlk && vk % amx::kWeiKBlk != 0));
        const int64_t fused_a =
            c.fused_copy_a ? b.batch_size * vm * amx::RoundUp(vk, amx::kWeiKBlk) * amx::kBf16Bytes
                           : 0;
        b.tile_workspace = std::max(
            b.tile_workspace, (tiles.c_tiles + (wary_k_tail ? 1 : 0)) * amx::kTileBytes + fused_a);
      }
    }
  }
  if (b.not_modelled == AmxNotModelled::kNone && !fits)
    b.not_modelled = AmxNotModelled::kTileOverflow;
}

}  // namespace

int64_t AmxScratchpad::Bytes() const {
  int64_t total = 0;
  for (const int64_t booking : {batch_list, buffer_a, buffer_b, buffer_c, tiles})
    if (booking > 0) total += booking + kBookingSlack;
  return total;
}

AmxBlocking ChooseAmxBlocking(int64_t batch, int64_t m, int64_t k, int64_t n, bool transposed_a,
                              bool transposed_b, int threads) {
  AmxBlocking b{.batch = batch, .m = m, .k = k, .n = n};
  if (batch <= 0 || m <= 0 || k <= 0 || n <= 0 || threads <= 0) {
    b.not_modelled = AmxNotModelled::kBadShape;
    return b;
  }
  // is_gemv_applicable: a vector operand takes the GEMV kernel (bf16 needs AVX512-BF16,
  // which every AMX CPU has), and the AMX implementation declines.
  if (m == 1 || n == 1) b.not_modelled = AmxNotModelled::kGemv;
  const amx::Conf conf = MakeConf(batch, m, k, n, transposed_a, transposed_b, threads);
  const amx::Choice choice = ChooseHeuristic(conf, b);
  CopyChoice(choice, b);
  if (b.m_blk <= 0 || b.n_blk <= 0 || b.k_blk <= 0) {
    if (b.modelled()) b.not_modelled = AmxNotModelled::kNoBlocking;
    return b;
  }
  SetTailsAndLeadingDims(conf, choice, b);
  SetTiles(choice, b);
  return b;
}

// init_aux_values and init_scratchpad.
AmxScratchpad AmxBookingsOf(const AmxBlocking& b) {
  AmxScratchpad s;
  s.modelled = b.modelled();
  if (b.m_blk <= 0 || b.n_blk <= 0 || b.k_blk <= 0) return s;
  const int64_t k_chunk_elems = b.k_blk * b.k_chunk * b.batch_size;
  const int64_t c_chunk = b.nthr_k == 1 ? amx::RoundUp(b.n_blk, b.ldc) * b.m_blk * amx::kAccBytes
                                        : amx::kAccBytes * b.ldc * b.m;  // all of C to reduce
  int64_t c_per_thread = 0;
  if (b.buffer_c) {
    const bool one_chunk = b.nthr_k > 1 || k_chunk_elems >= b.k;
    c_per_thread = one_chunk ? c_chunk : c_chunk * b.m_chunk * b.n_chunk;
  }
  const int64_t a_per_thread =
      b.buffer_a ? amx::kBf16Bytes * b.m_blk * b.lda * b.batch_size * b.k_chunk * b.m_chunk : 0;
  const int64_t b_per_thread = amx::kBf16Bytes * amx::RoundUp(b.n_blk, b.ldb) *
                               amx::RoundUp(b.k_blk, amx::kWeiKBlk) * b.batch_size * b.k_chunk;
  s.batch_list = b.nthr * kBatchElementsPerBlock * b.batch_size * kBatchElementBytes;
  s.buffer_a = b.nthr * a_per_thread;
  s.buffer_b = b.nthr * b_per_thread;
  s.buffer_c = b.nthr * c_per_thread;
  s.tiles = b.nthr * b.tile_workspace;
  return s;
}

AmxScratchpad AmxScratchpadOf(int64_t batch, int64_t m, int64_t k, int64_t n, bool transposed_a,
                              bool transposed_b, int threads) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, int>;
  static std::mutex mutex;
  static std::map<Key, AmxScratchpad> memo;
  const Key key{batch, m, k, n, transposed_a, transposed_b, threads};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = memo.find(key); it != memo.end()) return it->second;
  }
  const AmxBlocking blocking =
      ChooseAmxBlocking(batch, m, k, n, transposed_a, transposed_b, threads);
  AmxScratchpad scratchpad = blocking.modelled() ? AmxBookingsOf(blocking) : AmxScratchpad{};
  scratchpad.modelled = blocking.modelled();
  const std::lock_guard<std::mutex> lock(mutex);
  memo.emplace(key, scratchpad);
  return scratchpad;
}

}  // namespace headroom
