// The caching allocator model's free blocks of one pool, found best-fit: the smallest
// size that is large enough, then the lowest address. Blocks are grouped by exact size
// (a replay has a few hundred distinct sizes but thousands of free blocks), each group
// sorted by address from high to low, so the best fit is the back of a vector.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace headroom {

class FreeBlockIndex {
 public:
  void Insert(int64_t size, int64_t address, int block) {
    const size_t i = GroupOf(size);
    auto& group = groups_[i];
    group.insert(
        std::upper_bound(group.begin(), group.end(), Entry{address, block}, HigherAddress),
        Entry{address, block});
    nonempty_[i] = 1;
  }

  void Erase(int64_t size, int64_t address) {
    const size_t i = GroupOf(size);
    auto& group = groups_[i];
    group.erase(
        std::lower_bound(group.begin(), group.end(), Entry{address, 0}, HigherAddress));
    nonempty_[i] = !group.empty();
  }

  // Removes and returns the best-fit block of at least `size`, or -1 when none is.
  int TakeBestFit(int64_t size) {
    for (size_t i = LowerBound(size); i < groups_.size(); ++i) {
      if (!nonempty_[i]) continue;  // a byte array: scanning it stays in cache
      const int block = groups_[i].back().block;  // the lowest address
      groups_[i].pop_back();
      nonempty_[i] = !groups_[i].empty();
      return block;
    }
    return -1;
  }

  // Removes every block for which `remove(block)` is true.
  template <typename Predicate>
  void EraseIf(Predicate remove) {
    for (size_t i = 0; i < groups_.size(); ++i) {
      std::erase_if(groups_[i], [&](const Entry& e) { return remove(e.block); });
      nonempty_[i] = !groups_[i].empty();
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

  // The first index whose size is >= `size`; branch-free, as the sizes a replay asks
  // for follow no pattern a branch predictor could learn.
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

  // The index of the group of blocks of exactly `size`, created empty when there is
  // none. Sizes are kept in a sorted flat array (a replay looks them up hundreds of
  // thousands of times; new sizes are rare), and empty groups stay so that their
  // storage is reused.
  size_t GroupOf(int64_t size) {
    const size_t i = LowerBound(size);
    if (i == sizes_.size() || sizes_[i] != size) {
      sizes_.insert(sizes_.begin() + static_cast<std::ptrdiff_t>(i), size);
      groups_.insert(groups_.begin() + static_cast<std::ptrdiff_t>(i), std::vector<Entry>());
      nonempty_.insert(nonempty_.begin() + static_cast<std::ptrdiff_t>(i), 0);
    }
    return i;
  }

  std::vector<int64_t> sizes_;              // ascending
  std::vector<std::vector<Entry>> groups_;  // by sizes_; each by address, high to low
  std::vector<uint8_t> nonempty_;           // by sizes_: whether the group has blocks
};

}  // namespace headroom
