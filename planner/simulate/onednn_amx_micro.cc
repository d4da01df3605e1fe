// oneDNN v3.13's micro blocking heuristic for AMX matmul (amx_blocking_heuristics.cpp,
// matmul_amx_blocking_params_micro_t), used when the macro heuristic does not apply (a
// transposed A: a weight gradient) or finds nothing: from compute_blocking_heuristic's
// starting blocks, it scores M and N block and chunk sizes (and a K split over threads) by
// thread balance, L2 use and reuse of the copied data, in float32 as oneDNN does.
// Not covered: runtime dims, int8 (maybe_low_brg_blocking), zero points and scales.
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "planner/simulate/internal/onednn_amx_conf.h"

namespace headroom::amx {
namespace {

class Micro {
 public:
  Micro(const Conf& conf, int64_t m_blk, int64_t n_blk, int64_t k_blk, int64_t batch_size)
      : conf_(conf),
        m_(conf.m),
        k_(conf.k),
        n_(conf.n),
        nthr_(conf.nthr),
        m_blk_(m_blk),
        m_chunk_elems_(m_blk),
        n_blk_(n_blk),
        n_chunk_elems_(n_blk),
        k_blk_(k_blk),
        k_chunk_elems_(k_blk * batch_size),
        batch_size_(batch_size),
        need_buf_a_(conf.use_buffer_a) {}

  void SetBlockingParameters(int nthr_k, int64_t n_blk, int64_t n_chunk, int64_t m_blk,
                             int64_t m_chunk);
  float score() const { return score_; }
  Choice ToChoice() const;

 private:
  int64_t ActualLda() const;
  bool IsBufferCRequired() const;
  int64_t ChunkMemorySize();
  void SetKBlocking();
  float ThreadBalanceScore() const;
  float ReuseScore() const;
  float L2UtilizationScore() const;
  float CalculateBlockingScores() const;

  Conf conf_;
  int64_t m_, k_, n_;
  int nthr_k_ = 1, nthr_mnb_ = 1, nthr_ = 1;
  int64_t m_blk_, m_chunk_ = 1, m_chunk_elems_;
  int64_t n_blk_, n_chunk_ = 1, n_chunk_elems_;
  int64_t k_blk_, k_chunk_ = 1, k_chunk_elems_;
  int64_t batch_size_, current_lda_ = 0, chunk_mem_ = 0;
  bool need_buf_a_, need_buf_c_ = false, extendable_k_ = false;
  float score_ = 0.0f;
};

Choice Micro::ToChoice() const {
  return {.nthr = nthr_,
          .nthr_k = nthr_k_,
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
          .score = score_};
}

// matmul_amx_blocking_params_t::get_actual_lda.
int64_t Micro::ActualLda() const {
  if (!need_buf_a_) return conf_.user_lda;
  constexpr int64_t kLineElems = 64 / kBf16Bytes;
  int64_t lda = RoundUp(k_blk_, kLineElems);
  if (lda >= 512 && IsPow2(lda)) lda += kLineElems;
  return lda;
}

// is_buffer_c_required: fp32 partial sums for a bf16 output when K spans several chunks
// or blocks.
bool Micro::IsBufferCRequired() const {
  if (nthr_k_ > 1 && k_ > k_chunk_elems_) return true;
  return k_ > k_chunk_elems_ || k_ % k_blk_ > 0;
}

// calculate_chunk_memory_size (with update_k_blocking_dependent_params): what one chunk of
// A, B and C and their buffers take.
int64_t Micro::ChunkMemorySize() {
  k_chunk_elems_ = k_blk_ * k_chunk_ * batch_size_;
  current_lda_ = ActualLda();
  need_buf_c_ = IsBufferCRequired();
  const int64_t a = kBf16Bytes * k_chunk_elems_ * m_chunk_elems_;
  const int64_t a_buf = need_buf_a_ ? kBf16Bytes * current_lda_ * batch_size_ * m_chunk_elems_ : 0;
  const int64_t b = kBf16Bytes * k_chunk_elems_ * n_chunk_elems_;
  const int64_t b_buf = kBf16Bytes * n_blk_ * k_chunk_elems_;  // B is always copied
  const int64_t c = kBf16Bytes * m_chunk_elems_ * n_chunk_elems_;
  const int64_t c_buf = need_buf_c_ ? kAccBytes * m_chunk_elems_ * n_chunk_elems_ : 0;
  return a + a_buf + b + b_buf + c + c_buf;
}

// set_blocking_parameters, K of a tile row or more: the brgemm batch over K blocks, cut to
// fit L2, then merged into one block where the tail allows.
void Micro::SetKBlocking() {
  k_blk_ = std::min(RoundUp(CeilDiv(k_, nthr_k_), kVnni), kWeiKBlk);
  const int64_t k_blocks_per_thread = CeilDiv(CeilDiv(k_, k_blk_), nthr_k_);
  batch_size_ = k_blocks_per_thread;
  const int64_t chunk = ChunkMemorySize();
  const int64_t div_min = chunk / kL2Threshold;
  const int64_t div_max = CeilDiv(chunk, kL2Threshold);
  // A big power-of-2 LDA prefers longer linear runs.
  const int64_t adjust_threshold = conf_.lda_big_pow2 ? 2 : 0;
  if (div_min > adjust_threshold && batch_size_ > 1) {
    const int64_t kc1 = std::max<int64_t>(batch_size_ / div_min, 1);
    const int64_t kc2 = CeilDiv(batch_size_, div_max);
    const int64_t tail1 = k_blocks_per_thread % kc1;
    const int64_t tail2 = k_blocks_per_thread % kc2;
    // The size with the more even split across iterations.
    batch_size_ = !(tail1 == 0 || tail2 < tail1) || tail2 == 0 ? kc2 : kc1;
  }
  k_chunk_elems_ = k_blk_ * batch_size_ * k_chunk_;
  const int64_t brgemm_k = k_blk_ * batch_size_;
  const int64_t k_tail = k_ % k_blk_;
  extendable_k_ =
      k_ % kWeiKBlk != 0 && brgemm_k > kWeiKBlk && !conf_.use_buffer_a && current_lda_ == k_;
  if (extendable_k_) {
    k_blk_ = brgemm_k >= k_ ? k_ : brgemm_k;
    k_chunk_ = 1;
    batch_size_ = 1;
  } else if (k_tail == 0 && k_ % brgemm_k == 0) {
    k_blk_ = brgemm_k;
    batch_size_ = 1;
  } else if (nthr_k_ == 1 && k_ == brgemm_k + k_tail) {
    k_blk_ = brgemm_k;
    batch_size_ = 2;
  }
}

// set_blocking_parameters. Like oneDNN it keeps state between calls on one candidate (the
// A buffer decision of the previous call feeds this call's chunk size).
void Micro::SetBlockingParameters(int nthr_k, int64_t n_blk, int64_t n_chunk, int64_t m_blk,
                                  int64_t m_chunk) {
  nthr_k_ = std::max(1, nthr_k);
  nthr_mnb_ = conf_.nthr / nthr_k_;
  nthr_ = nthr_mnb_ * nthr_k_;
  n_blk_ = n_blk;
  n_chunk_ = n_chunk;
  m_blk_ = m_blk;
  m_chunk_ = m_chunk;
  if (n_blk == 0 || n_chunk == 0 || m_blk == 0 || m_chunk == 0) {
    k_blk_ = k_chunk_ = k_chunk_elems_ = batch_size_ = 0;
    score_ = 0.0f;
    return;
  }
  n_chunk_elems_ = n_blk_ * n_chunk_;
  m_chunk_elems_ = m_blk_ * m_chunk_;
  if (k_ < kWeiKBlk) {
    k_blk_ = RoundUp(k_, kVnni);
    batch_size_ = 1;
  } else {
    SetKBlocking();
  }
  need_buf_a_ = conf_.use_buffer_a || (!extendable_k_ && k_ % kVnni != 0);
  chunk_mem_ = ChunkMemorySize();
  score_ = CalculateBlockingScores();
}

// get_thread_balance_scores: 1 when every thread gets the same work without tails.
float Micro::ThreadBalanceScore() const {
  const int64_t m_chunks = CeilDiv(m_, m_chunk_elems_);
  const int64_t n_chunks = CeilDiv(n_, n_chunk_elems_);
  const float mnb = static_cast<float>(conf_.batch) *
                    (static_cast<float>(m_) / static_cast<float>(m_chunk_elems_)) *
                    (static_cast<float>(n_) / static_cast<float>(n_chunk_elems_)) /
                    static_cast<float>(RoundUp(conf_.batch * m_chunks * n_chunks, nthr_mnb_)) *
                    static_cast<float>(nthr_mnb_);
  float k_score = 1.0f;
  if (nthr_k_ > 1) {
    const int64_t k_chunks = CeilDiv(k_, k_chunk_elems_);
    constexpr float kParallelReductionPenalty = 0.8f;
    k_score = kParallelReductionPenalty *
              (static_cast<float>(k_) / static_cast<float>(k_chunk_elems_)) /
              static_cast<float>(RoundUp(k_chunks, nthr_k_)) * static_cast<float>(nthr_k_);
  }
  return mnb * k_score / static_cast<float>(conf_.nthr);
}

// get_copied_data_reusage_scores.
float Micro::ReuseScore() const {
  const int64_t desired_m = std::min<int64_t>(m_, 64 * 4);
  const int64_t desired_n = std::min<int64_t>(n_, 64 * (need_buf_a_ ? 4 : 1));
  const float coef_m =
      std::min(static_cast<float>(m_chunk_elems_) / static_cast<float>(desired_m), 1.0f);
  const float coef_n =
      std::min(static_cast<float>(n_chunk_elems_) / static_cast<float>(desired_n), 1.0f);
  return 0.5f * (coef_m + coef_n);
}

// get_L2_utilization_scores: 1 when a chunk fills the L2 threshold exactly.
float Micro::L2UtilizationScore() const {
  const float difference =
      std::fabs(static_cast<float>(kL2Threshold) - static_cast<float>(chunk_mem_)) /
      static_cast<float>(std::max(kL2Threshold, chunk_mem_));
  return 1.0f - difference;
}

// calculate_blocking_scores: balance, L2 use and reuse, weighted by the thread count.
float Micro::CalculateBlockingScores() const {
  if (n_blk_ == 0 || n_chunk_ == 0 || m_blk_ == 0 || m_chunk_ == 0 || k_blk_ == 0 ||
      batch_size_ == 0)
    return 0.0f;
  const float nthr_coeff = static_cast<float>(std::min(conf_.nthr, 100));
  const float reuse_factor = 1.0f;
  const float balance_factor = (nthr_coeff - 1.0f) / nthr_coeff;
  const float cache_factor = 1.0f / nthr_coeff;
  float scores = cache_factor * L2UtilizationScore() + reuse_factor * ReuseScore();
  if (balance_factor > 0.0f) scores += balance_factor * ThreadBalanceScore();
  return scores / (reuse_factor + balance_factor + cache_factor);
}

// compute_blocking_heuristic, get_block_candidate: M blocks of 2 to 4 tiles of 13 to 16 rows
// dividing M, else up to 64.
int64_t StartingMBlock(int64_t m) {
  for (int64_t rows = 16; rows >= 13; --rows)
    for (int64_t tiles = 4; tiles >= 2; --tiles)
      if (m % (tiles * rows) == 0) return tiles * rows;
  return std::min<int64_t>(m, 64);
}

// find_best_blocking's M block candidates, in the order of oneDNN's std::unordered_set
// (ties go to the first candidate met).
std::unordered_set<int64_t> MBlockCandidates(const Conf& conf, int64_t m_blk, int64_t min_m_blk) {
  std::unordered_set<int64_t> candidates;
  for (int64_t b = m_blk; b >= min_m_blk; b = b > 1 ? CeilDiv(b, 2) : b - 1) candidates.insert(b);
  if (conf.m > 16) {  // multiples of 16 too
    const int64_t max16 = std::min<int64_t>(RoundDown(conf.m, 16), 64);
    for (int64_t b = max16; b >= RoundUp(min_m_blk, 16); b -= 16) candidates.insert(b);
  }
  return candidates;
}

// compute_blocking_heuristic's starting blocks for the micro search.
struct Start {
  int64_t m_blk, n_blk, k_blk, batch_size;
};

// find_best_blocking, one K split over nthr_k threads: every N block (only the starting
// one: B's N block is fixed by the user's layout, check_n_blk_fixed), M block and chunk
// sizes; the first strictly better score wins.
void SearchOneKSplit(const Conf& conf, const Start& start, int nthr_k, int max_nthr_k,
                     int max_k_parallel, Micro& current, Micro& best) {
  const int nthr_bmn = conf.nthr / nthr_k;
  const int64_t num_m_blk = CeilDiv(conf.m, start.m_blk);
  const int64_t num_n_blk = CeilDiv(conf.n, start.n_blk);
  const int64_t work = conf.batch * num_m_blk * num_n_blk * std::min(max_k_parallel, nthr_k);
  const bool lots_of_work = work > 16 * conf.nthr;
  const bool low_parallelism = static_cast<float>(work) < 1.5f * static_cast<float>(conf.nthr);
  const int64_t min_m_blk =
      low_parallelism && start.m_blk > 32 ? CeilDiv(start.m_blk, 2) : start.m_blk;
  const int64_t min_n_blk = start.n_blk;
  const int64_t m_chunks_max = std::min<int64_t>(4, num_m_blk);
  const int64_t n_chunks_max = std::min<int64_t>(lots_of_work ? 6 : 4, num_n_blk);
  // oneDNN keeps skipping tail-heavy splits for these LLM shapes (a regression otherwise).
  const bool keep_all =
      conf.m == 4 && ((conf.n == 4096 && conf.k == 4096) || (conf.n == 11008 && conf.k == 4096) ||
                      (conf.n == 4096 && conf.k == 11008));
  const std::unordered_set<int64_t> m_blks = MBlockCandidates(conf, start.m_blk, min_m_blk);
  bool found = false;
  for (int64_t n_blk = start.n_blk; n_blk >= min_n_blk; n_blk -= 16) {
    for (const int64_t m_blk : m_blks) {
      for (int64_t n_chunk = n_chunks_max; n_chunk >= 1; --n_chunk) {
        for (int64_t m_chunk = m_chunks_max; m_chunk >= 1; --m_chunk) {
          current.SetBlockingParameters(nthr_k, n_blk, n_chunk, m_blk, m_chunk);
          const int64_t chunks =
              conf.batch * CeilDiv(conf.m, m_blk * m_chunk) * CeilDiv(conf.n, n_blk * n_chunk);
          // Too few chunks to share evenly over the threads.
          const bool skip = chunks < nthr_bmn * 3 && chunks % nthr_bmn != 0 && max_nthr_k == 1;
          if (skip && !keep_all) continue;
          if (current.score() > best.score()) {
            best = current;
            found = true;
          }
        }
      }
    }
  }
  if (found) return;
  current.SetBlockingParameters(nthr_k, min_n_blk, 1, min_m_blk, 1);
  if (current.score() > best.score()) best = current;
}

}  // namespace

Choice FindMicroBlocking(const Conf& conf_in) {
  Conf conf = conf_in;
  // compute_blocking_heuristic, prefer_copy_a: A is copied for a big power-of-2 K (its rows
  // alias in cache) with many rows.
  conf.use_buffer_a = conf.use_buffer_a || (conf.lda_big_pow2 && conf.m >= 1024);
  // A K tail off the tile row gets blocks of one tile row (an AMX brgemm call wants K a
  // multiple of 64 bytes or under 64 bytes).
  const bool fixed_k_tail = conf.k % kWeiKBlk > 0 && conf.k > kWeiKBlk;
  const int64_t k_blk =
      conf.k < kWeiKBlk ? RoundUp(conf.k, kVnni) : (fixed_k_tail ? kWeiKBlk : conf.k);
  const Start start{.m_blk = StartingMBlock(conf.m),
                    .n_blk = std::min(conf.wei_n_blk, conf.n),
                    .k_blk = k_blk,
                    .batch_size = std::max<int64_t>(conf.k / k_blk, 1)};
  Micro best(conf, start.m_blk, start.n_blk, start.k_blk, start.batch_size);
  Micro current = best;
  // Split K over threads only for one big matrix with many threads.
  const int max_k_parallel = static_cast<int>(CeilDiv(conf.k, 1024));
  const int max_nthr_k =
      conf.batch == 1 ? std::min(std::clamp(conf.nthr / 8, 1, 7), max_k_parallel) : 1;
  for (int nthr_k = 1; nthr_k <= max_nthr_k; ++nthr_k)
    SearchOneKSplit(conf, start, nthr_k, max_nthr_k, max_k_parallel, current, best);
  return best.ToChoice();
}

}  // namespace headroom::amx
