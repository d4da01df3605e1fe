// The plan: a training config with its checkpoint set resolved against the model's
// graph. It is what the solver returns, what a plan file stores, what `train` and its
// re-planning execute and what the exports read; one value, so the checkpoint set is
// never carried in two forms that can disagree.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/core/result.h"
#include "planner/core/training_config.h"

namespace headroom {

struct Plan {
  // Micro-batch, accumulation, precision, stack and the rest; config.checkpoint always
  // describes `checkpointed`.
  TrainingConfig config;
  std::vector<bool> checkpointed;  // one flag per block of the graph
  int64_t global_batch = 0;        // sequences per optimizer step, over every GPU

  // The plan a config states, its checkpoint policy resolved for `num_blocks` blocks
  // (the graph's count). Errors: a layer index out of range.
  static Result<Plan> FromConfig(const TrainingConfig& config, int num_blocks);
  // The plan with exactly these blocks checkpointed; the config's policy is rewritten
  // to name them.
  static Plan WithCheckpointed(TrainingConfig config, std::vector<bool> checkpointed,
                               int64_t global_batch);

  int num_blocks() const { return static_cast<int>(checkpointed.size()); }
  int num_checkpointed() const;
  bool checkpoints_all() const { return num_blocks() > 0 && num_checkpointed() == num_blocks(); }
  bool operator==(const Plan&) const = default;
};

}  // namespace headroom
