// The caching allocator model's free blocks of one pool, found best-fit: the smallest
// size that is large enough, then the lowest address. Blocks are grouped by exact size
// (a replay has a few hundred distinct sizes but thousands of free blocks), each group
// sorted by address from high to low, so the best fit is the back of a vector.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace headroom {

class FreeBlockIndex {
 public:
  void Insert(int64_t size, int64_t address, int block) {
    auto& group = GroupOf(size);
    group.insert(
        std::upper_bound(group.begin(), group.end(), Entry{address, block}, std::greater<>()),
        Entry{address, block});
  }

  void Erase(int64_t size, int64_t address) {
    auto& group = GroupOf(size);
    group.erase(
        std::lower_bound(group.begin(), group.end(), Entry{address, INT32_MAX}, std::greater<>()));
  }

  // Removes and returns the best-fit block of at least `size`, or -1 when none is.
  int TakeBestFit(int64_t size) {
    const auto first = std::lower_bound(sizes_.begin(), sizes_.end(), size);
    for (size_t i = first - sizes_.begin(); i < groups_.size(); ++i) {
      if (groups_[i].empty()) continue;
      const int block = groups_[i].back().second;  // the lowest address
      groups_[i].pop_back();
      return block;
    }
    return -1;
  }

  // Removes every block for which `remove(block)` is true.
  template <typename Predicate>
  void EraseIf(Predicate remove) {
    for (auto& group : groups_) {
      std::erase_if(group, [&](const Entry& e) { return remove(e.second); });
    }
  }

 private:
  using Entry = std::pair<int64_t, int>;  // address, block

  // The group of blocks of exactly `size`, created empty when there is none. Sizes are
  // kept in a sorted flat array (a replay looks them up hundreds of thousands of times;
  // new sizes are rare), and empty groups stay so that their storage is reused.
  std::vector<Entry>& GroupOf(int64_t size) {
    const auto it = std::lower_bound(sizes_.begin(), sizes_.end(), size);
    const auto i = it - sizes_.begin();
    if (it == sizes_.end() || *it != size) {
      sizes_.insert(it, size);
      groups_.insert(groups_.begin() + i, std::vector<Entry>());
    }
    return groups_[i];
  }

  std::vector<int64_t> sizes_;               // ascending
  std::vector<std::vector<Entry>> groups_;  // by sizes_; each by address, high to low
};

}  // namespace headroom
