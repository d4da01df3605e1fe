#include "planner/core/plan.h"

#include <algorithm>

namespace headroom {

Result<Plan> Plan::FromConfig(const TrainingConfig& config, int num_blocks) {
  Result<std::vector<bool>> flags = config.checkpoint.Resolve(num_blocks);
  if (!flags) return flags.error();
  return Plan{config, std::move(*flags),
              config.micro_batch * config.grad_accum_steps * config.parallel.gpus};
}

Plan Plan::WithCheckpointed(TrainingConfig config, std::vector<bool> checkpointed,
                            int64_t global_batch) {
  config.checkpoint = CheckpointPolicy::Of(checkpointed);
  return Plan{std::move(config), std::move(checkpointed), global_batch};
}

int Plan::num_checkpointed() const {
  return static_cast<int>(std::count(checkpointed.begin(), checkpointed.end(), true));
}

}  // namespace headroom
