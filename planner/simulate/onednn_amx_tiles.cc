// The AMX tile decomposition of one brgemm kernel, after oneDNN v3.13's brgemm_blocking_tmm
// (src/cpu/x64/brgemm/brgemm_utils.cpp) for the micro-kernel (uker) matmul uses, no bd mask:
// C is cut into bd_block x ld_block tiles, bd_block2 x ld_block2 of them accumulate at once.
// Each kernel's workspace is one 1 KiB tile per C tile (get_wsp_buffer_size).
#include <algorithm>

#include "planner/simulate/internal/onednn_amx_conf.h"

namespace headroom::amx {
namespace {

constexpr int64_t kMaxWidth = 16;  // rows (and 16 fp32 columns) of a tile

class TileBlocking {
 public:
  TileBlocking(int64_t bd, int64_t ld) : bd_(bd), ld_(ld), ldb_(ld / 16), ldb_tail_(ld % 16) {}

  void Decompose();
  void ApplyShapeHeuristics(int64_t reduce_dim);
  KernelTiles Tiles() const;

 private:
  void SetDecompositionByLd();
  bool Try3x1(int64_t width);
  bool Try2x2();
  void Recalc(int64_t bd_block, int64_t ld_block, int64_t bd_block2, int64_t ld_block2);
  void ApplyWideKHeuristics(int64_t reduce_dim, bool bdb_block_tail);
  void ApplySmallOrTailHeuristics(bool bdb_block_tail);
  // get_bd_block2 / get_ld_block2: the tiles in use, a tail block counting as one more.
  int64_t BdBlock2() const { return bdb_ <= bd_block2_ ? bdb_ : bd_block2_ + (bdb_tail_ ? 1 : 0); }
  int64_t LdBlock2() const { return ldb_ <= ld_block2_ ? ldb_ : ld_block2_ + (ldb_tail_ ? 1 : 0); }

  int64_t bd_, ld_;
  int64_t bd_block_ = 1, bdb_ = 0, bdb_tail_ = 0, bd_block2_ = 1;
  int64_t ld_block_ = 16, ldb_, ldb_tail_, ld_block2_ = 1;
  bool is_m_tail_ = false;
};

// set_decomposition_by_ld: up to 3 column tiles with one row tile, else 2x2.
void TileBlocking::SetDecompositionByLd() {
  if (bd_block2_ == 1 && ldb_ > 0 && ldb_tail_ == 0) {
    ld_block2_ = ldb_ % 3 == 0 ? 3 : (ldb_ % 2 == 0 ? 2 : 1);
  } else {
    ld_block2_ = ldb_ > 0 && ldb_ % 2 == 0 && ldb_tail_ == 0 && bd_block2_ < 3 ? 2 : 1;
  }
  if (ld_block2_ == 1 && !is_m_tail_ && ldb_tail_ == 0)
    bd_block2_ = bdb_ >= 3 ? 3 : (bdb_ >= 2 ? 2 : 1);
}

// try_3x1_decomposition: `width` row tiles (the last a tail) by one column tile.
bool TileBlocking::Try3x1(int64_t width) {
  is_m_tail_ = false;
  if (!(bd_ > (width - 1) * kMaxWidth && bd_ < width * kMaxWidth && ldb_tail_ == 0)) return false;
  bd_block_ = kMaxWidth;
  bdb_ = CeilDiv(bd_, bd_block_);
  bdb_tail_ = bd_ % bd_block_;
  is_m_tail_ = true;
  bd_block2_ = width;
  SetDecompositionByLd();
  return true;
}

// try_2x2_decomposition: the largest row block dividing bd (else the one with the largest
// tail), two row tiles by two column tiles where possible.
bool TileBlocking::Try2x2() {
  for (int64_t rows = kMaxWidth; rows >= 1; --rows) {
    if (bd_ % rows == 0) {
      bd_block_ = rows;
      break;
    }
  }
  if (bd_block_ == 1) {
    bd_block_ = std::min(kMaxWidth, bd_);
    bdb_tail_ = bd_ % kMaxWidth;
    for (int64_t rows = kMaxWidth; rows >= 1; --rows) {
      const int64_t tail = bd_ % rows;
      if (tail > bdb_tail_ || tail == 0) {
        bd_block_ = rows;
        bdb_tail_ = tail;
        if (tail == 0) break;
      }
    }
  }
  bdb_ = bd_ / bd_block_;
  bdb_tail_ = bd_ % bd_block_;
  bd_block2_ = bdb_ >= 2 ? 2 : 1;
  is_m_tail_ = false;
  SetDecompositionByLd();
  return !(ld_block2_ == 1 || bd_block2_ == 1 || bd_block_ < 8);
}

// recalc_blocking (uker: no separate tail blocks); 0 keeps a value.
void TileBlocking::Recalc(int64_t bd_block, int64_t ld_block, int64_t bd_block2,
                          int64_t ld_block2) {
  if (bd_block != 0) {
    bd_block_ = bd_block;
    bdb_ = CeilDiv(bd_, bd_block_);
    bdb_tail_ = bd_ % bd_block_;
    is_m_tail_ = bdb_tail_ != 0;
  }
  if (ld_block != 0) {
    ld_block_ = ld_block;
    ldb_ = CeilDiv(ld_, ld_block_);
    ldb_tail_ = ld_ % ld_block_;
  }
  if (bd_block2 != 0) bd_block2_ = bd_block2;
  if (ld_block2 != 0) ld_block2_ = ld_block2;
}

void TileBlocking::Decompose() {
  if (!Try2x2() && !Try3x1(3) && !Try3x1(2)) Try2x2();
  Recalc(bd_block_, ld_block_, bd_block2_, ld_block2_);
}

// brgemm_blocking_tmm's uker heuristics: 1x4, 1x5, 4x1 or 5x1 tiles when K fits L1 that way.
void TileBlocking::ApplyWideKHeuristics(int64_t reduce_dim, bool bdb_block_tail) {
  if (bdb_block_tail || ld_ % 16 != 0) return;
  const int64_t eff_k = reduce_dim * kBf16Bytes;
  const int64_t low_k = (kL1Bytes - 4 * 1024) / (6 * 16);
  const int64_t upper_k5 = (kL1Bytes - 5 * 1024) / (5 * 16);
  const int64_t upper_k4 = (kL1Bytes - 4 * 1024) / (4 * 16);
  const bool k5_fits = low_k <= eff_k && eff_k < upper_k5;
  const bool k4_fits = low_k <= eff_k && eff_k < upper_k4;
  if (ld_ % 80 == 0 && k5_fits && bd_ > 32) {
    Recalc(0, 16, 1, 5);
  } else if (ld_ % 64 == 0 && k4_fits && bd_ > 32) {
    Recalc(0, 16, 1, 4);
  } else if (bd_ % 80 == 0 && k5_fits && ld_ > 32) {
    Recalc(0, 16, 5, 1);
  } else if (bd_ % 64 == 0 && k4_fits && ld_ > 32) {
    Recalc(16, 16, 4, 1);
  }
}

// brgemm_blocking_tmm's uker heuristics for small dimensions or dimensions with tails.
void TileBlocking::ApplySmallOrTailHeuristics(bool bdb_block_tail) {
  const bool ldb_tail_16 = ld_ % 16 != 0;
  const bool weak_ldb = ld_block_ < 8 || ldb_tail_ > 0;
  const bool weak_bdb = bd_block_ < 8 || bdb_tail_ > 0;
  const bool ldb_tail_only = ldb_tail_16 && !bdb_block_tail;
  const bool bdb_tail_only = bdb_block_tail && !ldb_tail_16;
  const int64_t ld_r16 = RoundUp(ld_, 16), bd_r16 = RoundUp(bd_, 16);
  if (ldb_tail_only && ld_ > 64 && ld_block_ < 8) {
    Recalc(0, 16, 2, 1);
  } else if (ldb_tail_only && weak_ldb && ld_r16 == 64) {
    Recalc(0, 16, 1, 4);
  } else if (ldb_tail_only && weak_ldb && ld_r16 == 48) {
    Recalc(0, 16, 1, 3);
  } else if (ldb_tail_only && weak_ldb && ld_r16 == 32) {
    Recalc(0, 16, 2, 2);
  } else if (bd_ <= 16) {
    Recalc(bd_, 16, 0, 0);
    Recalc(0, 0, 1, std::min<int64_t>(ldb_tail_16 ? (ldb_ > 4 ? 3 : 4) : 5, CeilDiv(ld_, 16)));
  } else if (bdb_tail_only && weak_bdb && bd_ > 64) {
    Recalc(16, 16, 1, 2);
  } else if (bdb_tail_only && weak_bdb && bd_r16 == 64) {
    Recalc(16, 16, 4, 1);
  } else if (bdb_tail_only && weak_bdb && bd_r16 == 48) {
    Recalc(16, 16, 3, 1);
  } else if (bdb_tail_only && weak_bdb && bd_r16 == 32 && ld_ % 32 == 0) {
    Recalc(16, 16, 2, 2);
  } else if (ld_ <= 16) {
    Recalc(16, 16, 0, 0);
    Recalc(0, 0, std::min<int64_t>(bdb_tail_ ? (bdb_ > 4 ? 3 : 4) : 5, CeilDiv(bd_, 16)), 1);
  } else if (bdb_block_tail && ldb_tail_16 && bd_r16 == 32 && ld_r16 == 32 &&
             (weak_ldb || weak_bdb)) {
    Recalc(16, 16, 2, 2);
  }
}

void TileBlocking::ApplyShapeHeuristics(int64_t reduce_dim) {
  const bool bdb_block_tail = !(bd_block_ > 12 && bd_ % bd_block_ == 0);
  ApplyWideKHeuristics(reduce_dim, bdb_block_tail);
  ApplySmallOrTailHeuristics(bdb_block_tail);
}

// get_num_C_tiles, and brgemm_blocking_tmm's check that A (get_num_A_tiles), B and C tiles
// fit the 8 tile registers.
KernelTiles TileBlocking::Tiles() const {
  constexpr int64_t kTileRegisters = 8;
  const int64_t c = BdBlock2() * LdBlock2();
  const int64_t a_needed = bdb_tail_ && bdb_ > 1 ? 2 : 1;
  const int64_t a = std::max(a_needed, std::min(BdBlock2(), kTileRegisters - c - 1));
  const int64_t b_needed = ldb_tail_ && ldb_ > 1 ? 2 : 1;
  const int64_t b = std::max(b_needed, std::min(LdBlock2(), kTileRegisters - c - a));
  return {.c_tiles = static_cast<int>(c), .fits = a + b + c <= kTileRegisters};
}

}  // namespace

KernelTiles TilesOf(int64_t bd, int64_t ld, int64_t reduce_dim) {
  TileBlocking blocking(bd, ld);
  blocking.Decompose();
  blocking.ApplyShapeHeuristics(reduce_dim);
  return blocking.Tiles();
}

}  // namespace headroom::amx
