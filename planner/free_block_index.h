// The caching allocator model's free blocks of one pool, found best-fit: the smallest
// size that is large enough, then the lowest address. Blocks are grouped by exact size
// (a replay has a few hundred distinct sizes but thousands of free blocks), each group
// sorted by address from high to low, so the best fit is the back of a vector.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

namespace headroom {

class FreeBlockIndex {
 public:
  void Insert(int64_t size, int64_t address, int block) {
    auto& group = by_size_[size];
    group.insert(
        std::upper_bound(group.begin(), group.end(), Entry{address, block}, std::greater<>()),
        Entry{address, block});
  }

  void Erase(int64_t size, int64_t address) {
    auto& group = by_size_.at(size);
    group.erase(
        std::lower_bound(group.begin(), group.end(), Entry{address, INT32_MAX}, std::greater<>()));
  }

  // Removes and returns the best-fit block of at least `size`, or -1 when none is.
  int TakeBestFit(int64_t size) {
    for (auto it = by_size_.lower_bound(size); it != by_size_.end(); ++it) {
      if (it->second.empty()) continue;
      const int block = it->second.back().second;  // the lowest address
      it->second.pop_back();
      return block;
    }
    return -1;
  }

  // Removes every block for which `remove(block)` is true.
  template <typename Predicate>
  void EraseIf(Predicate remove) {
    for (auto& [size, group] : by_size_) {
      std::erase_if(group, [&](const Entry& e) { return remove(e.second); });
    }
  }

 private:
  using Entry = std::pair<int64_t, int>;  // address, block
  std::map<int64_t, std::vector<Entry>> by_size_;
};

}  // namespace headroom
