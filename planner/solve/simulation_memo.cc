#include "planner/solve/simulation_memo.h"

namespace headroom {

SimulationMemo::Key SimulationMemo::KeyOf(const OpGraph& graph, const TrainingConfig& config,
                                          const std::vector<bool>& checkpointed,
                                          const DeviceSpec& device, bool first_step) {
  return {&graph,
          config,
          checkpointed,
          device.is_cuda,
          device.AllocationGranularity(),
          device.CublasWorkspaceBytes(),
          first_step};
}

size_t SimulationMemo::HashOf(const Key& key) {
  // What varies between the searches of one sweep; the full key is compared in Find.
  size_t h = std::hash<const void*>()(key.graph);
  for (int64_t v : {key.config.micro_batch, key.config.grad_accum_steps, key.config.parallel.gpus,
                    static_cast<int64_t>(key.config.parallel.sharding),
                    static_cast<int64_t>(key.config.precision), key.cublas_workspace_bytes,
                    static_cast<int64_t>(key.first_step)})
    h = h * 1000003u ^ std::hash<int64_t>()(v);
  return h ^ std::hash<std::vector<bool>>()(key.checkpointed);
}

const SimulationMemo::Entry* SimulationMemo::Find(const Key& key, size_t hash) const {
  const auto bucket = entries_.find(hash);
  if (bucket == entries_.end()) return nullptr;
  for (const Entry& e : bucket->second)
    if (e.key == key) return &e;
  return nullptr;
}

void SimulationMemo::Add(Entry entry, size_t hash) {
  if (!Find(entry.key, hash)) entries_[hash].push_back(std::move(entry));
}

std::shared_ptr<const Timeline> SimulationMemo::Profile(const Key& key,
                                                        const std::function<Timeline()>& make) {
  const size_t hash = HashOf(key);
  {
    const std::lock_guard lock(mutex_);
    if (const Entry* e = Find(key, hash)) return e->profile;
  }
  // Simulated outside the lock: the other thread's searches go on meanwhile.
  auto profile = std::make_shared<const Timeline>(make());
  const std::lock_guard lock(mutex_);
  Add({key, profile, 0}, hash);
  return profile;
}

int64_t SimulationMemo::FirstStepPeak(const Key& key, const std::function<int64_t()>& make) {
  const size_t hash = HashOf(key);
  {
    const std::lock_guard lock(mutex_);
    if (const Entry* e = Find(key, hash)) return e->peak;
  }
  const int64_t peak = make();
  const std::lock_guard lock(mutex_);
  Add({key, nullptr, peak}, hash);
  return peak;
}

size_t SimulationMemo::size() const {
  const std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& [hash, bucket] : entries_) n += bucket.size();
  return n;
}

}  // namespace headroom
