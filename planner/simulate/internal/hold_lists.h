// The step simulator's record of which buffers each owner holds (an op until its
// backward, a checkpointed block until its backward ends). Private to planner/simulate/.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>
#include <vector>

namespace headroom {

// Buffers held per owner (an op until its backward, a checkpointed block until its
// backward ends), as lists in one pool released in the order they were added: a
// simulation adds tens of thousands of holds, and a vector per owner would allocate.
class HoldLists {
 public:
  void Reset(size_t owners) {
    first_.assign(owners, -1);
    last_.assign(owners, -1);
    nodes_.clear();
  }
  void Add(int owner, int64_t buffer) {
    const int node = static_cast<int>(nodes_.size());
    nodes_.push_back({buffer, -1});
    if (last_[owner] < 0) {
      first_[owner] = node;
    } else {
      nodes_[last_[owner]].next = node;
    }
    last_[owner] = node;
  }
  // Calls visit(buffer) for each buffer `owner` holds.
  template <typename Visit>
  void ForEach(int owner, Visit visit) const {
    for (int n = first_[owner]; n >= 0; n = nodes_[n].next) visit(nodes_[n].buffer);
  }
  // Calls release(buffer) for each buffer `owner` holds, then empties its list.
  template <typename Release>
  void ReleaseAll(int owner, Release release) {
    for (int n = first_[owner]; n >= 0; n = nodes_[n].next) release(nodes_[n].buffer);
    first_[owner] = last_[owner] = -1;
  }

 private:
  struct Node {
    int64_t buffer;
    int next;
  };
  std::vector<int> first_, last_;  // per owner; -1 when it holds nothing
  std::vector<Node> nodes_;
};

}  // namespace headroom
