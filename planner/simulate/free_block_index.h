// The caching allocator model's free blocks of one pool, found best-fit: the smallest
// size that is large enough, then the lowest address. Blocks are grouped by exact size
// (a llama-3-70b replay holds about a hundred free blocks at a time, up to some 600,
// many of them of the same few sizes), each group
// sorted by address from high to low, so the best fit is the back of a vector. A group
// is found by its size through a hash table (inserts and erases, several per event) or
// by a search of the sorted sizes (best fit, once per allocation), then a bitmap of the
// groups that hold a block, in size order: most groups are empty at any one time, and
// stepping over them one by one took 40% of the allocation model's samples (perf).
#pragma once

#include "planner/simulate/layer.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace headroom {

class FreeBlockIndex {
 public:
  FreeBlockIndex() { Rehash(); }

  void Insert(int64_t size, int64_t address, int block) {
    int id = FindGroup(size);
    if (id < 0) id = AddGroup(size);
    auto& group = groups_[id];
    group.insert(std::upper_bound(group.begin(), group.end(), Entry{address, block}, HigherAddress),
                 Entry{address, block});
    if (group.size() == 1) MarkHolding(id, true);
  }

  // `size` and `address` must name a block in the index.
  void Erase(int64_t size, int64_t address) {
    const int id = FindGroup(size);
    auto& group = groups_[id];
    group.erase(std::lower_bound(group.begin(), group.end(), Entry{address, 0}, HigherAddress));
    if (group.empty()) MarkHolding(id, false);
  }

  // Removes and returns the best-fit block of at least `size`, or -1 when none is.
  int TakeBestFit(int64_t size) {
    const Fit fit = BestFit(size);
    if (fit.group < 0) return -1;
    auto& group = groups_[fit.group];
    const int block = group.back().block;  // the lowest address
    group.pop_back();
    if (group.empty()) MarkHolding(fit.group, false);
    return block;
  }

  // The size of the block TakeBestFit(size) would return, or -1 when there is none.
  int64_t BestFitSize(int64_t size) const { return BestFit(size).size; }

  // Removes every block for which `remove(block)` is true.
  template <typename Predicate>
  void EraseIf(Predicate remove) {
    for (size_t i = FirstHolding(0); i < sizes_.size(); i = FirstHolding(i + 1)) {
      auto& group = groups_[sorted_ids_[i]];
      std::erase_if(group, [&](const Entry& e) { return remove(e.block); });
      if (group.empty()) MarkHolding(sorted_ids_[i], false);
    }
  }

 private:
  // Trivially copyable (unlike std::pair), so inserting into a long group is a memmove:
  // a big model frees dozens of same-sized blocks.
  struct Entry {
    int64_t address;
    int block;
  };
  static bool HigherAddress(const Entry& a, const Entry& b) { return a.address > b.address; }

  struct Fit {
    int group = -1;     // -1: no free block is large enough
    int64_t size = -1;  // the group's block size
  };
  Fit BestFit(int64_t size) const {
    // A block of exactly the size asked for is the best fit, and the common case: a
    // replay frees and asks for the same sizes over and over.
    if (const int id = FindGroup(size); id >= 0 && !groups_[id].empty()) return {id, size};
    const size_t i = FirstHolding(LowerBound(size));
    if (i >= sizes_.size()) return {};
    return {sorted_ids_[i], sizes_[i]};
  }

  // The first position at or after `from`, in size order, whose group holds a block;
  // sizes_.size() or more when none does.
  size_t FirstHolding(size_t from) const {
    size_t word = from / 64;
    if (word >= holding_.size()) return sizes_.size();
    uint64_t bits = holding_[word] & (~uint64_t{0} << (from % 64));
    while (bits == 0) {
      if (++word == holding_.size()) return sizes_.size();
      bits = holding_[word];
    }
    return word * 64 + static_cast<size_t>(std::countr_zero(bits));
  }

  void MarkHolding(int id, bool holds) {
    const size_t at = LowerBound(size_of_[id]);  // rare: a group fills or empties
    const uint64_t bit = uint64_t{1} << (at % 64);
    holding_[at / 64] = holds ? holding_[at / 64] | bit : holding_[at / 64] & ~bit;
  }

  // Opens an empty position at `at` of the bitmap: the bits above it move up one.
  void OpenPosition(size_t at) {
    if (sizes_.size() > 64 * holding_.size()) holding_.push_back(0);
    for (size_t w = holding_.size() - 1; w > at / 64; --w)
      holding_[w] = (holding_[w] << 1) | (holding_[w - 1] >> 63);
    const uint64_t low = (uint64_t{1} << (at % 64)) - 1;  // the bits below `at` stay
    uint64_t& word = holding_[at / 64];
    word = (word & low) | ((word & ~low) << 1);
  }

  // The first index into sizes_ whose size is >= `size`; branch-free, as the sizes a
  // replay asks for follow no pattern a branch predictor could learn.
  size_t LowerBound(int64_t size) const {
    const int64_t* base = sizes_.data();
    size_t n = sizes_.size();
    if (n == 0) return 0;
    while (n > 1) {
      const size_t half = n / 2;
      base = base[half - 1] < size ? base + half : base;
      n -= half;
    }
    return static_cast<size_t>(base - sizes_.data()) + (*base < size ? 1 : 0);
  }

  // Open addressing over a power-of-two table; sizes are multiples of 512 B.
  size_t Slot(int64_t size) const {
    return static_cast<size_t>((static_cast<uint64_t>(size) >> 9) * 0x9E3779B97F4A7C15ULL) >>
           (64 - table_bits_);
  }

  // The id of the group of blocks of exactly `size`, or -1 when there is none. Ids are
  // stable and empty groups stay, so that their storage is reused.
  int FindGroup(int64_t size) const {
    const size_t mask = table_.size() - 1;
    for (size_t s = Slot(size);; s = (s + 1) & mask) {
      if (table_[s].id < 0 || table_[s].size == size) return table_[s].id;
    }
  }

  // Creates the (empty) group of blocks of `size`; out of line, as it is rare.
  [[gnu::noinline]] int AddGroup(int64_t size) {
    const int id = static_cast<int>(groups_.size());
    groups_.emplace_back();
    const size_t at = LowerBound(size);
    sizes_.insert(sizes_.begin() + static_cast<std::ptrdiff_t>(at), size);
    sorted_ids_.insert(sorted_ids_.begin() + static_cast<std::ptrdiff_t>(at), id);
    size_of_.push_back(size);
    OpenPosition(at);
    if (2 * groups_.size() > table_.size()) {
      Rehash();  // at most half full
    } else {
      AddToTable(size, id);
    }
    return id;
  }

  void AddToTable(int64_t size, int id) {
    const size_t mask = table_.size() - 1;
    size_t s = Slot(size);
    while (table_[s].id >= 0) s = (s + 1) & mask;
    table_[s] = {size, id};
  }

  void Rehash() {
    table_bits_ = std::max(table_bits_ + 1, 6);
    table_.assign(size_t{1} << table_bits_, TableSlot{0, -1});
    for (size_t i = 0; i < sizes_.size(); ++i) AddToTable(sizes_[i], sorted_ids_[i]);
  }

  struct TableSlot {
    int64_t size;
    int id;  // -1: empty
  };

  std::vector<std::vector<Entry>> groups_;  // by id; each by address, high to low
  std::vector<int64_t> sizes_;              // ascending
  std::vector<int> sorted_ids_;             // the group id of each of sizes_
  std::vector<int64_t> size_of_;            // by group id
  std::vector<uint64_t> holding_;           // bit i: the group at sizes_[i] holds a block
  std::vector<TableSlot> table_;            // size -> group id
  int table_bits_ = 5;
};

}  // namespace headroom
