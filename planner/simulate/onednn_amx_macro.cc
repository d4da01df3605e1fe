// oneDNN v3.13's macro blocking heuristic for AMX matmul (amx_blocking_heuristics.cpp,
// matmul_amx_blocking_params_macro_t), for bf16 with no post-ops: the small-dims shortcuts,
// then a search over every split of the threads across batch, M, K and N that scores each
// split's best horizontal and vertical traversal with a float32 cost model. The float
// arithmetic keeps oneDNN's order of operations: ties between candidates are decided by it.
// With no post-ops is_postops_bound never holds, so its branches are left out.
#include <algorithm>
#include <map>
#include <set>

#include "planner/simulate/internal/onednn_amx_conf.h"

namespace headroom::amx {
namespace {

// amx_blocking_heuristics.hpp, bw_map_t: bandwidths (bytes per cycle) measured on an EMR
// machine; DRAM bandwidth by the number of cores sharing the data, interpolated linearly.
struct Bandwidth {
  static constexpr float kL1LoadHit = static_cast<float>(106.41);
  static constexpr float kL1StoreHit = kL1LoadHit;
  static constexpr float kL1LoadMiss = static_cast<float>(106.41 / 2.28);
  static constexpr float kL1StoreMiss = static_cast<float>(106.41 / 2.85);
  static constexpr float kLlc = static_cast<float>(6.0);

  static float Dram(int sharing_cores) {
    static const std::map<int, float> kPoints = {{32, 4.06f}, {16, 3.31f}, {8, 2.98f},
                                                 {4, 2.39f},  {2, 0.9f},   {1, 2.28f}};
    const float x = static_cast<float>(sharing_cores);
    const auto it = kPoints.lower_bound(static_cast<int>(x));
    if (it == kPoints.end()) return kPoints.rbegin()->second;
    if (it == kPoints.begin()) return it->second;
    const auto prev = std::prev(it);
    return prev->second + (it->second - prev->second) * (x - static_cast<float>(prev->first)) /
                              static_cast<float>(it->first - prev->first);
  }
};

// The best single-core blocking of each traversal while set_blocking_parameters searches.
struct Search {
  int64_t best_k_h = 0, best_n_h = 0, best_m_v = 0, best_k_v = 0;
  float best_score_h = 0.0f, best_score_v = 0.0f;
  bool horizontal_not_possible = false, vertical_not_possible = false;
};

// The per-strip sizes calculate_blocking_scores derives from the traversal.
struct Strips {
  float num_tmuls, num_strips, nt_miss, l1_reuse;
  float first_shared, first_private, first_share_coef;
  float mid_shared, mid_private, mid_share_coef;
};

class Macro {
 public:
  explicit Macro(const Conf& conf)
      : conf_(conf), m_(conf.m), k_(conf.k), n_(conf.n), nthr_(conf.nthr) {
    need_buf_a_ = conf.use_buffer_a;
  }

  Choice ToChoice() const;
  bool MaybeSmallDims();
  void SearchGrid(Macro& best);
  void TryHorizontalOnlyVariants(Macro& best);

 private:
  static constexpr int64_t kGemmBytes = kBf16Bytes;
  static constexpr int64_t kMinKElems = 256 / kGemmBytes;
  static constexpr int64_t kMinMnElems = 64 / kBf16Bytes;
  static constexpr int64_t kWriteBoundKElems = 256 / kGemmBytes;
  static constexpr int64_t kWriteBoundMinNElems = 256 / kGemmBytes;

  void SetCoreDivs(int b, int m, int k, int n);
  void SetTmulSizes();
  void SetDecomposition();
  bool DivsAreAcceptable() const;
  int64_t ActualLda() const;
  bool SkipExtendableK() const;
  void SetSmallDimsCommon();
  bool SmallM();
  bool SmallK();
  bool SmallN();
  int64_t CalcKBlk(int64_t l1_dim) const;
  static std::set<int64_t> BlkCandidates(int64_t dim_per_thread, int64_t decomposition);
  int64_t L2MatrixUsage(int64_t k_chunk, int64_t mn_blk, int64_t k_blk, bool horizontal,
                        bool force_b_to_l2 = false) const;
  int64_t L2MatrixAndCUsage(int64_t k_chunk, int64_t mn_blk, int64_t k_blk, bool horizontal) const;
  int64_t Bw(int64_t m_blk, int64_t k_chunk, int64_t k_blk, int64_t n_blk, bool horizontal) const;
  float EvaluateSingleCore(int64_t k_chunk, int64_t mn_blk, int64_t k_blk, bool horizontal,
                           bool force_b_to_l2 = false) const;
  void CalcHorizontal(Search& s, int64_t k_blk_h, int64_t min_k_chunk, bool force_b_to_l2) const;
  void CalcVertical(Search& s, int64_t k_blk_v) const;
  bool VerticalHasL2Issues(const Search& s, int64_t k_blk_v) const;
  bool IsHorizontalSelected(const Search& s) const;
  void ApplyHorizontal(Search& s, int64_t k_blk_h, bool force_b_to_l2);
  void ApplyVertical(const Search& s, int64_t k_blk_v);
  bool SetBlockingParameters(bool force_horizontal = false, bool force_b_to_l2 = false);
  bool BTransformFitsInL2() const;
  Strips StripsOf() const;
  float StripMidCycles(const Strips& s) const;
  float ReductionCycles(bool& feasible) const;
  float CalculateBlockingScores() const;
  bool IsBetterThan(const Macro& other) const;

  Conf conf_;
  int64_t m_, k_, n_;
  int nthr_m_ = 1, nthr_n_ = 1, nthr_k_ = 1, nthr_b_ = 1;
  int nthr_;  // the threads this blocking uses
  int64_t m_per_thread_ = 0, k_per_thread_ = 0, n_per_thread_ = 0, b_per_thread_ = 0;
  int64_t m_tmul_ = 0, n_tmul_ = 0, k_tmul_ = 0;
  int64_t m_decomposition_ = 32, n_decomposition_ = 32;
  int64_t m_blk_ = 0, m_chunk_ = 1, n_blk_ = 0, n_chunk_ = 1, k_blk_ = 0, k_chunk_ = 1;
  int64_t batch_size_ = 0, current_lda_ = 0;
  bool is_horizontal_ = false, is_a_nt_ = true, use_fused_copy_a_ = false;
  bool need_buf_a_ = false, need_buf_c_ = false, extendable_k_ = false;
  float score_ = 0.0f;
};

Choice Macro::ToChoice() const {
  return {.nthr = nthr_,
          .nthr_m = nthr_m_,
          .nthr_n = nthr_n_,
          .nthr_k = nthr_k_,
          .nthr_b = nthr_b_,
          .m_blk = m_blk_,
          .m_chunk = m_chunk_,
          .n_blk = n_blk_,
          .n_chunk = n_chunk_,
          .k_blk = k_blk_,
          .k_chunk = k_chunk_,
          .batch_size = batch_size_,
          .lda = current_lda_,
          .buffer_a = need_buf_a_,
          .buffer_c = need_buf_c_,
          .extendable_k = extendable_k_,
          .fused_copy_a = use_fused_copy_a_,
          .horizontal = is_horizontal_,
          .score = score_};
}

void Macro::SetCoreDivs(int b, int m, int k, int n) {
  nthr_b_ = b;
  nthr_m_ = m;
  nthr_k_ = k;
  nthr_n_ = n;
  m_per_thread_ = CeilDiv(m_, m);
  k_per_thread_ = CeilDiv(k_, k);
  n_per_thread_ = CeilDiv(n_, n);
  b_per_thread_ = CeilDiv(conf_.batch, b);
}

// set_tmul_sizes (determine_tmul_size: the even split of m_per_thread into 16-row tiles).
void Macro::SetTmulSizes() {
  m_tmul_ = CeilDiv(m_per_thread_, CeilDiv(m_per_thread_, 16));
  n_tmul_ = 16;
  k_tmul_ = std::min(kWeiKBlk, k_);
}

// set_decomposition: 2x2 tiles of C per micro-kernel call.
void Macro::SetDecomposition() {
  m_decomposition_ = std::min(m_, 2 * m_tmul_);
  n_decomposition_ = std::min(n_, 2 * n_tmul_);
}

bool Macro::DivsAreAcceptable() const {
  const bool bad_m = RoundUp(m_per_thread_, m_tmul_) < kMinMnElems && nthr_m_ > 1;
  const bool bad_k = k_per_thread_ < kMinKElems && nthr_k_ > 1;
  // A write-bound layer (small K, no reduction) wants wider N per thread.
  const bool write_bound = nthr_k_ == 1 && k_per_thread_ < kWriteBoundKElems;
  const int64_t min_n = write_bound ? kWriteBoundMinNElems : kMinMnElems;
  const bool bad_n = RoundUp(n_per_thread_, n_tmul_) < min_n && nthr_n_ > 1;
  const bool bad_b = nthr_b_ > conf_.batch;
  return !bad_m && !bad_k && !bad_n && !bad_b;
}

// matmul_amx_blocking_params_t::get_actual_lda: a copied A is padded to cache lines (and off
// big powers of 2); otherwise the user's.
int64_t Macro::ActualLda() const {
  if (!need_buf_a_) return conf_.user_lda;
  constexpr int64_t kLineElems = 64 / kBf16Bytes;
  int64_t lda = RoundUp(k_blk_, kLineElems);
  if (lda >= 512 && IsPow2(lda)) lda += kLineElems;
  return lda;
}

// skip_extendable_k: no need to extend K when it splits into whole VNNI tiles.
bool Macro::SkipExtendableK() const {
  auto splits_into_tiles = [](int64_t k) {
    const int64_t ops = CeilDiv(k, 64 / kGemmBytes);
    const int64_t tile = k / ops;
    return k % ops == 0 && tile <= 64 / kGemmBytes && tile % kVnni == 0;
  };
  const int64_t tail = k_ % k_blk_;
  return splits_into_tiles(k_blk_) && (tail == 0 || splits_into_tiles(tail));
}

// maybe_small_dims_heuristics, set_common: the whole K in one block, no A or C buffer.
void Macro::SetSmallDimsCommon() {
  k_blk_ = k_;
  k_chunk_ = 1;
  batch_size_ = 1;
  need_buf_c_ = false;
  need_buf_a_ = false;
  extendable_k_ = k_ % kWeiKBlk != 0 && !SkipExtendableK() && ActualLda() == k_;
  is_a_nt_ = true;
  use_fused_copy_a_ = false;
  score_ = 1.0f;
  current_lda_ = ActualLda();
}

constexpr float kCoreUtilizationThreshold = 0.75f;

// maybe_small_dims_heuristics, M <= 32 with B copied transposed: split N over the threads.
bool Macro::SmallM() {
  n_decomposition_ = std::min(n_, conf_.wei_n_blk);
  m_decomposition_ = m_;
  const int64_t n_per_core = RoundUp(CeilDiv(n_, conf_.nthr), n_decomposition_);
  SetCoreDivs(1, 1, 1, static_cast<int>(CeilDiv(n_, n_per_core)));
  if (nthr_n_ < kCoreUtilizationThreshold * conf_.nthr) return false;
  m_blk_ = m_;
  m_chunk_ = 1;
  n_blk_ = n_decomposition_;
  n_chunk_ = n_per_core / n_decomposition_;
  // B is always copied here. oneDNN sizes a K chunk for the copy, then set_common drops it;
  // only the refusal when A alone overflows L2 survives. A exactly filling L2 would divide
  // by zero in oneDNN: refused here too.
  if (m_ * k_ >= kL2Threshold) return false;
  SetSmallDimsCommon();
  return true;
}

// maybe_small_dims_heuristics, K within one tile row: split M, traverse C horizontally.
bool Macro::SmallK() {
  const int64_t m_per_core = CeilDiv(m_, conf_.nthr);
  SetCoreDivs(1, static_cast<int>(CeilDiv(m_, m_per_core)), 1, 1);
  SetTmulSizes();
  SetDecomposition();
  if (nthr_m_ < kCoreUtilizationThreshold * conf_.nthr) return false;
  m_blk_ = m_decomposition_;
  m_chunk_ = CeilDiv(m_per_core, m_decomposition_);
  // The copied B, its transposed copy and a strip of C chunked to fit L2.
  const int64_t b_bytes = n_ * k_ + n_ * RoundUp(k_, kWeiKBlk) + n_ * m_decomposition_;
  n_chunk_ = CeilDiv(b_bytes, kL2Threshold);
  n_blk_ = RoundUp(CeilDiv(n_, n_chunk_), conf_.wei_n_blk);
  SetSmallDimsCommon();
  return true;
}

// maybe_small_dims_heuristics, N <= 32: split M in 32-row tiles over the threads.
bool Macro::SmallN() {
  const int64_t m_per_core = CeilDiv(m_, conf_.nthr);
  m_per_thread_ = m_per_core;
  m_decomposition_ = CeilDiv(m_per_core, CeilDiv(m_per_core, 32));
  n_tmul_ = 16;
  n_decomposition_ = 32;
  k_tmul_ = std::min(kWeiKBlk, k_);
  const int64_t m_per_core_actual = RoundUp(m_per_thread_, m_decomposition_);
  SetCoreDivs(1, static_cast<int>(CeilDiv(m_, m_per_core_actual)), 1, 1);
  if (nthr_m_ < kCoreUtilizationThreshold * conf_.nthr) return false;
  m_blk_ = m_decomposition_;
  m_chunk_ = CeilDiv(m_per_core, m_decomposition_);
  n_blk_ = n_;
  n_chunk_ = 1;
  // oneDNN sizes a K chunk here that set_common then replaces with the whole K.
  SetSmallDimsCommon();
  return true;
}

// maybe_small_dims_heuristics: a memory-bound shape (one of M, K, N small, one matrix) gets
// each core a contiguous piece of the big matrix. B is always copied (plain user weights).
bool Macro::MaybeSmallDims() {
  const bool b_is_not_flat = conf_.transposed_b;
  if (m_ <= 32 && b_is_not_flat && conf_.batch == 1) return SmallM();
  if (k_ <= kWeiKBlk && conf_.batch == 1) return SmallK();
  if (n_ <= 32 && conf_.batch == 1) return SmallN();
  return false;
}

// calc_k_blk: the K block that keeps a panel of the l1_dim matrix in L1 beside 2x2 C tiles.
int64_t Macro::CalcKBlk(int64_t l1_dim) const {
  const int64_t c_tiles = m_decomposition_ * n_decomposition_ * kAccBytes;
  const int64_t d_tiles = m_decomposition_ * RoundUp(n_decomposition_ * kBf16Bytes, 64);
  const int64_t available = kL1Threshold - (c_tiles * 2 + d_tiles);
  const int64_t largest_k_tiles = available / (l1_dim * kGemmBytes) / k_tmul_;
  const int64_t k_per_thread_tiles = CeilDiv(CeilDiv(k_, k_tmul_), nthr_k_);
  const int64_t k_blocks = CeilDiv(k_per_thread_tiles, largest_k_tiles);
  return std::min(CeilDiv(k_per_thread_tiles, k_blocks) * k_tmul_, k_);
}

// blk_candidates: every group size an even split of the inner blocks gives (sorted).
std::set<int64_t> Macro::BlkCandidates(int64_t dim_per_thread, int64_t decomposition) {
  const int64_t inner_blocks = CeilDiv(dim_per_thread, decomposition);
  std::set<int64_t> sizes;
  for (int64_t groups = 1; groups <= inner_blocks; ++groups)
    sizes.insert(CeilDiv(inner_blocks, groups));
  return sizes;
}

int64_t Macro::L2MatrixUsage(int64_t k_chunk, int64_t mn_blk, int64_t k_blk, bool horizontal,
                             bool force_b_to_l2) const {
  const int64_t decomposition = horizontal ? m_decomposition_ : n_decomposition_;
  const int64_t kk = std::min(k_blk * k_chunk, k_per_thread_);
  const int64_t l1_matrix = 2 * decomposition * kk * kGemmBytes;  // 2: prefetch
  int64_t l2_matrix = mn_blk * kk * kGemmBytes;
  if (force_b_to_l2) l2_matrix += mn_blk * k_blk * k_chunk * kBf16Bytes;  // the original too
  const int64_t c_post = horizontal ? 2 * m_decomposition_ * RoundUp(mn_blk * kBf16Bytes, 64)
                                    : 2 * RoundUp(n_decomposition_ * kBf16Bytes, 64) * mn_blk;
  // fp32 accumulation into a bf16 output: partial sums unless K is one block.
  const int64_t c_tmp = k_blk == k_ ? 2 * m_decomposition_ * n_decomposition_ * kAccBytes
                                    : 2 * decomposition * mn_blk * kAccBytes;
  return l1_matrix + l2_matrix + c_tmp + c_post;
}

int64_t Macro::L2MatrixAndCUsage(int64_t k_chunk, int64_t mn_blk, int64_t k_blk,
                                 bool horizontal) const {
  const int64_t per_thread = horizontal ? m_per_thread_ : n_per_thread_;
  const int64_t kk = std::min(k_blk * k_chunk, k_per_thread_);
  // 2x: keeps C fresher than A and B in the LRU.
  return 2 * per_thread * kk * kGemmBytes + 2 * mn_blk * kk * kGemmBytes +
         per_thread * mn_blk * kAccBytes;
}

// bw (oneDNN narrows these byte counts to int; the planner's shapes stay far below 2^31).
int64_t Macro::Bw(int64_t m_blk, int64_t k_chunk, int64_t k_blk, int64_t n_blk,
                  bool horizontal) const {
  const int64_t kk = std::min(k_blk * k_chunk, k_per_thread_);
  const int64_t a_bw = m_blk * kk * kGemmBytes;
  const int64_t b_bw = n_blk * kk * kGemmBytes;
  const bool c_stays =
      L2MatrixAndCUsage(k_chunk, horizontal ? n_blk : m_blk, k_blk, horizontal) < kL2Threshold ||
      kk == k_;
  const int64_t c_bw = c_stays && nthr_k_ == 1 ? 0 : m_blk * n_blk * kAccBytes;
  return a_bw + b_bw + c_bw;
}

// evaluate_single_core_blocking: compute over traffic (ratio), if the blocks fit L2.
float Macro::EvaluateSingleCore(int64_t k_chunk, int64_t mn_blk, int64_t k_blk, bool horizontal,
                                bool force_b_to_l2) const {
  if (L2MatrixUsage(k_chunk, mn_blk, k_blk, horizontal, force_b_to_l2) > kL2Threshold) return 0;
  const int64_t m_blk = horizontal ? m_decomposition_ : mn_blk;
  const int64_t n_blk = horizontal ? mn_blk : n_decomposition_;
  const int64_t compute = m_blk * std::min(k_blk * k_chunk, k_per_thread_) * n_blk;
  return static_cast<float>(compute) /
         static_cast<float>(Bw(m_blk, k_chunk, k_blk, n_blk, horizontal));
}

// set_blocking_parameters, calc_horizontal: the best N group and K chunk walking C by rows.
void Macro::CalcHorizontal(Search& s, int64_t k_blk_h, int64_t min_k_chunk,
                           bool force_b_to_l2) const {
  if (RoundUp(m_per_thread_, m_decomposition_) * (nthr_m_ - 1) >= m_ ||
      RoundUp(k_per_thread_, k_blk_h) * (nthr_k_ - 1) >= k_) {
    s.horizontal_not_possible = true;
    return;
  }
  const std::set<int64_t> n_candidates = BlkCandidates(n_per_thread_, n_decomposition_);
  const std::set<int64_t> k_candidates = BlkCandidates(k_per_thread_, k_blk_h);
  s.best_n_h = 0;
  for (auto n = n_candidates.rbegin(); n != n_candidates.rend(); ++n) {
    for (auto k = k_candidates.rbegin(); k != k_candidates.rend(); ++k) {
      const float score =
          EvaluateSingleCore(*k, *n * n_decomposition_, k_blk_h, true, force_b_to_l2);
      if (score > s.best_score_h && *k >= min_k_chunk) {
        s.best_score_h = score;
        s.best_k_h = *k;
        s.best_n_h = *n;
      }
    }
  }
  if (s.best_n_h == 0) {
    s.horizontal_not_possible = true;
    return;
  }
  if (RoundUp(n_per_thread_, s.best_n_h * n_decomposition_) * (nthr_n_ - 1) >= n_ ||
      RoundUp(k_per_thread_, s.best_k_h * k_blk_h) * (nthr_k_ - 1) >= k_)
    s.horizontal_not_possible = true;
}

// set_blocking_parameters, calc_vertical: the best M group and K chunk walking C by columns.
void Macro::CalcVertical(Search& s, int64_t k_blk_v) const {
  if (RoundUp(n_per_thread_, n_decomposition_) * (nthr_n_ - 1) >= n_ ||
      RoundUp(k_per_thread_, k_blk_v) * (nthr_k_ - 1) >= k_) {
    s.vertical_not_possible = true;
    return;
  }
  const std::set<int64_t> m_candidates = BlkCandidates(m_per_thread_, m_decomposition_);
  const std::set<int64_t> k_candidates = BlkCandidates(k_per_thread_, k_blk_v);
  for (auto m = m_candidates.rbegin(); m != m_candidates.rend(); ++m) {
    for (auto k = k_candidates.rbegin(); k != k_candidates.rend(); ++k) {
      const float score = EvaluateSingleCore(*k, *m * m_decomposition_, k_blk_v, false);
      if (score > s.best_score_v) {
        s.best_score_v = score;
        s.best_k_v = *k;
        s.best_m_v = *m;
      }
    }
  }
  if (s.best_m_v == 0) {
    s.vertical_not_possible = true;
    return;
  }
  if (RoundUp(m_per_thread_, s.best_m_v * m_decomposition_) * (nthr_m_ - 1) >= m_ ||
      RoundUp(k_per_thread_, s.best_k_v * k_blk_v) * (nthr_k_ - 1) >= k_)
    s.vertical_not_possible = true;
  if (VerticalHasL2Issues(s, k_blk_v)) s.vertical_not_possible = true;
}

// calc_vertical's L2 checks: A re-read per K loop, and C's rows colliding in L2 sets.
bool Macro::VerticalHasL2Issues(const Search& s, int64_t k_blk_v) const {
  const int64_t mn_blk = s.best_m_v * m_decomposition_;
  int64_t l2_util = 0;
  if (!s.vertical_not_possible) {
    l2_util = L2MatrixAndCUsage(s.best_k_v, mn_blk, k_blk_v, false);
    if (l2_util > kL2Threshold) l2_util = L2MatrixUsage(s.best_k_v, mn_blk, k_blk_v, false);
  }
  const int64_t k_loops = CeilDiv(k_, k_blk_v * s.best_k_v);
  if (k_loops != 1 && (k_loops != nthr_k_ || l2_util * nthr_k_ >= kL2Threshold)) return true;
  constexpr int64_t kL2WaySize = kL2Bytes / kL2Ways;  // sets x line size
  constexpr int64_t kPage = 4096;
  int64_t cache_stride = n_ * kBf16Bytes % kPage;
  if (cache_stride == 0) cache_stride = kPage;
  return kL2WaySize % cache_stride == 0 &&
         CeilDiv(cache_stride * m_per_thread_, kL2WaySize) >= kL2WaysThreshold;
}

bool Macro::IsHorizontalSelected(const Search& s) const {
  if (s.horizontal_not_possible) return false;
  if (s.vertical_not_possible) return true;
  if (m_per_thread_ < m_tmul_ * 2) return true;  // too few M tiles to go vertical
  if (n_per_thread_ < n_tmul_ * 2) return false;
  return m_per_thread_ >= n_per_thread_;
}

// set_blocking_parameters, the horizontal branch: gives up on L1 blocking when A's K blocks
// would thrash L1, then re-checks whether the final A panel fits L1 (is_a_nt_).
void Macro::ApplyHorizontal(Search& s, int64_t k_blk_h, bool force_b_to_l2) {
  const int64_t a_l1 = k_blk_h * m_decomposition_ * kGemmBytes;
  const int64_t c_l1 = n_decomposition_ * m_decomposition_ * kAccBytes;
  const int64_t d_post = m_decomposition_ * RoundUp(n_decomposition_ * kBf16Bytes, 64);
  is_a_nt_ = false;
  if (k_blk_h < k_ && CeilDiv(k_, k_blk_h) * a_l1 + 2 * c_l1 + d_post > kL1Threshold) {
    s.best_score_h = 0;
    CalcHorizontal(s, kWeiKBlk, k_blk_h / kWeiKBlk, force_b_to_l2);
    k_blk_h = std::min(kWeiKBlk * s.best_k_h, k_);
    s.best_k_h = 1;
    is_a_nt_ = true;
  }
  const bool a_fits_l1 =
      k_blk_h * m_decomposition_ * kGemmBytes + 2 * c_l1 + d_post <= kL1Threshold;
  const bool write_bound = nthr_k_ == 1 && k_per_thread_ < kWriteBoundKElems;
  if (a_fits_l1 && !write_bound) is_a_nt_ = false;
  k_blk_ = k_blk_h;
  k_chunk_ = s.best_k_h;
  n_blk_ = std::min(s.best_n_h * n_decomposition_, n_);
  n_chunk_ = 1;
  m_blk_ = m_decomposition_;
  m_chunk_ = CeilDiv(m_per_thread_, m_blk_);
  // An unaligned A reused across at least 3 N blocks is copied inside the kernel.
  use_fused_copy_a_ =
      k_ % kWeiKBlk != 0 && n_blk_ >= n_decomposition_ * 3 && k_blk_ >= (64 / kGemmBytes) * 4;
  extendable_k_ =
      k_ % kWeiKBlk != 0 && !SkipExtendableK() && !use_fused_copy_a_ && ActualLda() == k_;
}

void Macro::ApplyVertical(const Search& s, int64_t k_blk_v) {
  k_blk_ = k_blk_v;
  k_chunk_ = s.best_k_v;
  n_blk_ = n_decomposition_;
  n_chunk_ = CeilDiv(n_per_thread_, n_blk_);
  m_blk_ = std::min(s.best_m_v * m_decomposition_, m_);
  m_chunk_ = 1;
  is_a_nt_ = true;
  use_fused_copy_a_ = false;
  extendable_k_ = k_ % kWeiKBlk != 0 && !SkipExtendableK() && ActualLda() == k_;
}

// set_blocking_parameters: the best blocking of this thread split, or false if neither
// traversal is possible.
bool Macro::SetBlockingParameters(bool force_horizontal, bool force_b_to_l2) {
  Search s;
  s.vertical_not_possible = force_horizontal;
  const int64_t k_blk_h = CalcKBlk(m_decomposition_);
  CalcHorizontal(s, k_blk_h, 0, force_b_to_l2);
  const int64_t k_blk_v = CalcKBlk(n_decomposition_);
  if (!s.vertical_not_possible) CalcVertical(s, k_blk_v);
  if (s.vertical_not_possible && s.horizontal_not_possible) return false;
  is_horizontal_ = IsHorizontalSelected(s);
  if (is_horizontal_) {
    ApplyHorizontal(s, k_blk_h, force_b_to_l2);
  } else {
    ApplyVertical(s, k_blk_v);
  }
  batch_size_ = 1;
  current_lda_ = ActualLda();
  // Partial sums need an fp32 C buffer: a K split, or K in several blocks (bf16 output).
  need_buf_c_ = nthr_k_ != 1 || k_blk_ != k_;
  score_ = CalculateBlockingScores();
  return true;
}

bool Macro::BTransformFitsInL2() const {
  return L2MatrixUsage(k_chunk_, n_blk_, k_blk_, true, true) < kL2Threshold;
}

// calculate_blocking_scores, the first half: the traversal's strip sizes and sharing.
Strips Macro::StripsOf() const {
  const int64_t dst_bytes = nthr_k_ == 1 ? kBf16Bytes : kAccBytes;
  const int64_t tmul = m_tmul_ * k_tmul_ * n_tmul_;
  const int64_t a_size = m_per_thread_ * k_per_thread_ * kGemmBytes;
  const int64_t b_size = n_per_thread_ * k_per_thread_ * kGemmBytes;
  auto f = [](int64_t x) { return static_cast<float>(x); };
  if (is_horizontal_) {
    const int64_t strip_dst = m_decomposition_ * n_per_thread_ * dst_bytes;
    const int64_t a_strip = m_decomposition_ * k_per_thread_ * kGemmBytes;
    return {f(m_decomposition_ * k_per_thread_ * n_per_thread_ / tmul),
            f(CeilDiv(m_per_thread_, m_decomposition_)),
            f(b_size),
            f(CeilDiv(n_blk_, n_decomposition_)),
            f(b_size),
            f(a_strip + strip_dst),
            f(nthr_m_),
            f(a_strip),
            f(strip_dst),
            f(std::max(1, nthr_n_))};
  }
  const int64_t strip_dst = n_decomposition_ * m_per_thread_ * dst_bytes;
  const int64_t b_strip = n_decomposition_ * k_per_thread_ * kGemmBytes;
  return {f(n_decomposition_ * k_per_thread_ * m_per_thread_ / tmul),
          f(CeilDiv(n_per_thread_, n_decomposition_)),
          f(a_size),
          f(CeilDiv(m_blk_, m_decomposition_)),
          f(a_size),
          f(b_strip + strip_dst),
          f(nthr_n_),
          f(b_strip),
          f(strip_dst),
          f(std::max(1, nthr_m_))};
}

// calculate_blocking_scores: the cycles of one middle strip (L1, DRAM, LLC or the TMULs).
float Macro::StripMidCycles(const Strips& s) const {
  using B = Bandwidth;
  const float t_miss = s.mid_shared * 2;
  const float t_hit = s.mid_shared * (s.l1_reuse - 1);
  const float c_elems = static_cast<float>(m_blk_ * n_blk_);
  const int64_t n_groups = CeilDiv(n_blk_, n_decomposition_);
  const float c_write_miss =
      static_cast<float>(m_blk_ * n_groups * RoundUp(n_decomposition_ * kBf16Bytes, 64));
  const float c_write_total =
      static_cast<float>(m_blk_ * n_groups * CeilDiv(n_decomposition_, 16) * 64);
  const float c_write_hit = c_write_total - c_write_miss;
  const float c_read_tmp = c_elems * kAccBytes;
  const float c_tmp_bw = k_blk_ == k_ ? B::kL1LoadHit : B::kL1StoreMiss;
  const float c_tmp = kAccBytes * c_elems * static_cast<float>(k_chunk_) / c_tmp_bw;
  const float c_l1 = c_write_miss / B::kL1StoreMiss + c_write_hit / B::kL1StoreHit +
                     c_read_tmp / B::kL1StoreHit + c_tmp;
  const float l1 =
      t_miss / B::kL1LoadMiss + t_hit / B::kL1LoadHit + s.nt_miss / B::kL1LoadMiss + c_l1;
  const bool b_copy_v = !is_horizontal_;  // B is always copied
  const float b_copy_cycles =
      b_copy_v ? s.mid_shared / B::Dram(static_cast<int>(s.mid_share_coef)) : 0;
  float dram, llc;
  if (b_copy_v) {
    dram = s.mid_private / B::Dram(1);
    llc = s.mid_private / B::kLlc;
  } else {
    dram = s.mid_shared / B::Dram(static_cast<int>(s.mid_share_coef)) + s.mid_private / B::Dram(1);
    llc = (s.mid_private + s.mid_shared) / B::kLlc;
  }
  const int num_cycles_per_tmul = static_cast<int>(m_tmul_ * 64 * 16 / 1024);
  const float tmul = s.num_tmuls * static_cast<float>(num_cycles_per_tmul);
  return b_copy_cycles + std::max({dram, llc, l1, tmul});  // no post-ops: no AVX term
}

// calculate_blocking_scores, the reduction of a K split; infeasible when C does not fit.
float Macro::ReductionCycles(bool& feasible) const {
  feasible = true;
  if (nthr_k_ == 1) return 0;
  if (m_per_thread_ * n_per_thread_ * kAccBytes * 2 >= kL2Threshold || conf_.batch != 1) {
    feasible = false;
    return 0;
  }
  const int64_t mn_threads = nthr_m_ * nthr_n_;
  const float read_bytes =
      static_cast<float>(m_ * RoundUp(n_, 16) * kAccBytes * (nthr_k_ - 1) / mn_threads);
  const int64_t in_bytes =
      (m_per_thread_ * k_per_thread_ + n_per_thread_ * k_per_thread_) * kGemmBytes +
      m_per_thread_ * n_per_thread_ * kBf16Bytes;
  const float read =
      in_bytes < kL2Threshold ? read_bytes / Bandwidth::Dram(2) : read_bytes / Bandwidth::kLlc;
  const float write_bytes = static_cast<float>(m_ * n_ * kBf16Bytes / mn_threads);
  return read + write_bytes / Bandwidth::Dram(1) + 25000;
}

// calculate_blocking_scores: peak cycles over modelled cycles.
float Macro::CalculateBlockingScores() const {
  const Strips s = StripsOf();
  const bool b_copy_h = is_horizontal_;  // B is always copied
  const float b_copy_cycles_h =
      b_copy_h ? s.first_shared / Bandwidth::Dram(static_cast<int>(s.first_share_coef)) : 0;
  const float mid = StripMidCycles(s);
  float first;
  if (!b_copy_h) {
    first = s.first_shared / Bandwidth::Dram(static_cast<int>(s.first_share_coef)) +
            s.first_private / Bandwidth::Dram(1);
  } else if (BTransformFitsInL2()) {
    first = mid;
  } else {
    first = s.first_shared / Bandwidth::kLlc;
  }
  const float gemm = b_copy_cycles_h + first + (s.num_strips - 1) * mid;
  bool feasible = true;
  const float reduction = ReductionCycles(feasible);
  if (!feasible) return 0;
  const float total_macs = static_cast<float>(m_ * k_ * n_ * conf_.batch);
  const float total_cycles = (gemm + reduction) * static_cast<float>(b_per_thread_);
  const float peak_macs_per_cycle = static_cast<float>((1024 / kGemmBytes) * conf_.nthr);
  return total_macs / peak_macs_per_cycle / total_cycles;
}

// operator>: the higher score; at a tie, vertical over a horizontal that bypasses L1 when
// A's rows fit L2, else the larger L2 reuse.
bool Macro::IsBetterThan(const Macro& other) const {
  if (other.score_ > score_) return false;
  if (other.score_ < score_) return true;
  if (!is_horizontal_ && other.is_horizontal_)
    return m_per_thread_ * k_ + m_per_thread_ * n_ < kL2Threshold && other.is_a_nt_;
  if (is_horizontal_ && !other.is_horizontal_)
    return !(other.m_per_thread_ * k_ + other.m_per_thread_ * n_ < kL2Threshold && is_a_nt_);
  return m_chunk_ * n_chunk_ > other.m_chunk_ * other.n_chunk_;
}

// find_best_blocking: every thread count down from nthr, every split of it over batch, M, K
// and N. `this` is the one candidate oneDNN reuses throughout.
void Macro::SearchGrid(Macro& best) {
  for (int threads = conf_.nthr; threads > 0; --threads) {
    nthr_ = threads;
    for (int b = 1; b <= threads; ++b) {
      if (threads % b != 0) continue;
      const int after_b = threads / b;
      for (int m = 1; m <= after_b; ++m) {
        if (after_b % m != 0) continue;
        const int after_m = after_b / m;
        for (int k = 1; k <= after_m; ++k) {
          if (after_m % k != 0) continue;
          SetCoreDivs(b, m, k, after_m / k);
          SetTmulSizes();
          SetDecomposition();
          if (DivsAreAcceptable() && SetBlockingParameters() && IsBetterThan(best)) best = *this;
        }
      }
    }
  }
}

// find_best_blocking's last step: a vertical winner with B copied from a plain (not
// transposed) layout is tried horizontally too, with and without the B copy counted in L2.
// The candidate keeps its tile sizes from the grid's last split, as in oneDNN.
void Macro::TryHorizontalOnlyVariants(Macro& best) {
  if (conf_.transposed_b || best.is_horizontal_) return;
  nthr_ = best.nthr_b_ * best.nthr_m_ * best.nthr_n_ * best.nthr_k_;
  SetCoreDivs(best.nthr_b_, best.nthr_m_, best.nthr_k_, best.nthr_n_);
  if (SetBlockingParameters(true) && IsBetterThan(best)) best = *this;
  if (SetBlockingParameters(true, true) && IsBetterThan(best)) best = *this;
}

}  // namespace

Choice FindMacroBlocking(const Conf& conf) {
  Macro best(conf);
  if (best.MaybeSmallDims()) {
    Choice choice = best.ToChoice();
    choice.small_dims = true;
    return choice;
  }
  Macro current(conf);
  current.SearchGrid(best);
  current.TryHorizontalOnlyVariants(best);
  return best.ToChoice();
}

}  // namespace headroom::amx
