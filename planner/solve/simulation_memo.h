// Simulations the plan search repeats across GPU types, kept for the next search that
// asks. `headroom capacity` solves the same counts, schemes and micro-batches for every
// GPU type; two of the search's simulations do not depend on how much memory the device
// has: the chain profile (micro-batch 1, nothing checkpointed) and a candidate's first
// step (replayed with no capacity). They depend on the graph, the config, the checkpoint
// set and the allocator's inputs (granularity, cuBLAS workspace), which form the key; the
// device's context is added by the caller. Shared by threads.
#pragma once

#include "planner/solve/layer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "planner/core/gpu_catalog.h"
#include "planner/core/training_config.h"
#include "planner/graph/op_graph.h"
#include "planner/simulate/memory_timeline.h"

namespace headroom {

class SimulationMemo {
 public:
  struct Key {
    const OpGraph* graph = nullptr;  // graphs are compared by identity: share them
    TrainingConfig config;
    std::vector<bool> checkpointed;
    bool is_cuda = false;
    int64_t granularity = 0;
    int64_t cublas_workspace_bytes = 0;
    bool first_step = false;  // a first step's peak, else a chain profile

    bool operator==(const Key&) const = default;
  };
  static Key KeyOf(const OpGraph& graph, const TrainingConfig& config,
                   const std::vector<bool>& checkpointed, const DeviceSpec& device,
                   bool first_step);

  // The profile under `key`, simulated by `make` on the first ask.
  std::shared_ptr<const Timeline> Profile(const Key& key, const std::function<Timeline()>& make);
  // The first step's peak under `key` (without the device's context), from `make` once.
  int64_t FirstStepPeak(const Key& key, const std::function<int64_t()>& make);
  // Simulations kept.
  size_t size() const;

 private:
  struct Entry {
    Key key;
    std::shared_ptr<const Timeline> profile;
    int64_t peak = 0;
  };
  const Entry* Find(const Key& key, size_t hash) const;
  void Add(Entry entry, size_t hash);
  static size_t HashOf(const Key& key);

  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<Entry>> entries_;
};

}  // namespace headroom
