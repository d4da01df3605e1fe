// The caching allocator model's free blocks of one pool, found best-fit: the smallest
// size that is large enough, then the lowest address. Blocks are grouped by exact size
// (a llama-3-70b replay holds about a hundred free blocks at a time, up to some 600,
// many of them of the same few sizes), each group
// sorted by address from high to low, so the best fit is the back of a vector. A group
// is found by its size through a hash table (inserts and erases, several per event) or
// by a search of the sorted sizes (best fit, once per allocation).
#pragma once

#include "planner/simulate/layer.h"

#include <algorithm>
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
  }

  // `size` and `address` must name a block in the index.
  void Erase(int64_t size, int64_t address) {
    auto& group = groups_[FindGroup(size)];
    group.erase(std::lower_bound(group.begin(), group.end(), Entry{address, 0}, HigherAddress));
  }

  // Removes and returns the best-fit block of at least `size`, or -1 when none is.
  int TakeBestFit(int64_t size) {
    const Fit fit = BestFit(size);
    if (fit.group < 0) return -1;
    auto& group = groups_[fit.group];
    const int block = group.back().block;  // the lowest address
    group.pop_back();
    return block;
  }

  // The size of the block TakeBestFit(size) would return, or -1 when there is none.
  int64_t BestFitSize(int64_t size) const { return BestFit(size).size; }

  // Removes every block for which `remove(block)` is true.
  template <typename Predicate>
  void EraseIf(Predicate remove) {
    for (auto& group : groups_) {
      std::erase_if(group, [&](const Entry& e) { return remove(e.block); });
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
    for (size_t i = LowerBound(size); i < sorted_ids_.size(); ++i) {
      if (!groups_[sorted_ids_[i]].empty()) return {sorted_ids_[i], sizes_[i]};
    }
    return {};
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
  std::vector<TableSlot> table_;            // size -> group id
  int table_bits_ = 5;
};

}  // namespace headroom
