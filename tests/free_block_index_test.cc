// The allocator model's free-block index against a plain reference: a sorted set of
// (size, address) pairs searched in order. Hundreds of distinct sizes, so that the
// bitmap of groups that hold a block spans several words and sizes are inserted below,
// between and above the ones already there.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "planner/simulate/free_block_index.h"

namespace headroom {
namespace {

struct Reference {
  std::set<std::pair<int64_t, int64_t>> blocks;  // (size, address): best fit first
  std::map<int64_t, int> block_at;               // address -> block
  int BestFit(int64_t size) const {
    auto it = blocks.lower_bound({size, INT64_MIN});
    return it == blocks.end() ? -1 : block_at.at(it->second);
  }
};

TEST(FreeBlockIndex, FindsTheSameBestFitAsASortedSetThroughInsertsErasesAndReleases) {
  std::mt19937_64 rng(7);
  FreeBlockIndex index;
  Reference ref;
  int64_t next_address = 0;
  int next_block = 0;
  auto random_size = [&] {
    return int64_t{512} * std::uniform_int_distribution<int64_t>(1, 400)(rng);
  };
  for (int op = 0; op < 20000; ++op) {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (kind < 5 || ref.blocks.empty()) {  // a block is freed
      const int64_t size = random_size();
      next_address += 1 << 20;
      index.Insert(size, next_address, next_block);
      ref.blocks.insert({size, next_address});
      ref.block_at[next_address] = next_block++;
    } else if (kind < 8) {  // an allocation takes the best fit
      const int64_t size = random_size();
      const int expected = ref.BestFit(size);
      ASSERT_EQ(index.BestFitSize(size),
                expected < 0 ? -1 : ref.blocks.lower_bound({size, INT64_MIN})->first);
      ASSERT_EQ(index.TakeBestFit(size), expected) << "op " << op << ", size " << size;
      if (expected >= 0) ref.blocks.erase(ref.blocks.lower_bound({size, INT64_MIN}));
    } else if (kind < 9) {  // a neighbour is merged away
      auto it = std::next(ref.blocks.begin(),
                          std::uniform_int_distribution<size_t>(0, ref.blocks.size() - 1)(rng));
      index.Erase(it->first, it->second);
      ref.blocks.erase(it);
    } else {  // fully free segments are released: every third block, by its number
      index.EraseIf([](int block) { return block % 3 == 0; });
      std::erase_if(ref.blocks, [&](const auto& b) { return ref.block_at.at(b.second) % 3 == 0; });
    }
  }
  // Drained in best-fit order, the two agree to the last block.
  while (!ref.blocks.empty()) {
    ASSERT_EQ(index.TakeBestFit(512), ref.BestFit(512));
    ref.blocks.erase(ref.blocks.begin());
  }
  EXPECT_EQ(index.TakeBestFit(512), -1);
}

}  // namespace
}  // namespace headroom
