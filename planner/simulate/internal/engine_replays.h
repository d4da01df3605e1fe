// The engines a sharded plan runs under (FSDP2, DeepSpeed ZeRO-2, ZeRO-3), replayed
// together: the step simulator calls each hook once, at the point of the step where the
// engines act, and whichever engine the plan uses does its part.
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstdint>
#include <optional>

#include "planner/core/training_config.h"
#include "planner/simulate/internal/fsdp_replay.h"
#include "planner/simulate/internal/replay_memory.h"
#include "planner/simulate/internal/simulation_tables_impl.h"
#include "planner/simulate/internal/zero3_replay.h"
#include "planner/simulate/internal/zero_replay.h"

namespace headroom {

class EngineReplays {
 public:
  // Builds the plan's engine, if any, and lets it take what it holds from the start.
  EngineReplays(const SimulationTables::Impl& tables, const TrainingConfig& config,
                bool optimizer_offloaded, const ReplayMemory& memory);

  void StartForward();
  void BeforeOpForward(int op);
  void AfterOpForward(int op);
  void EndForward();
  // A checkpointed block's recomputation: only ZeRO-3's module hooks run again.
  void BeforeRecomputedOp(int op);
  void AfterRecomputedOp(int op);
  void StartBackward();
  void BeforeOpBackward(int op);
  void AfterOpBackward(int op);
  void EndBackward();
  // DeepSpeed's gradient hook: true when the engine took parameter i's fresh gradient
  // (into its bucket); otherwise AccumulateGrad keeps it as .grad.
  bool TakeGradient(size_t i, int64_t grad);
  void OptimizerStep(int step);
  void ZeroGrad();

 private:
  std::optional<FsdpReplay> fsdp_;
  std::optional<ZeroReplay> zero_;
  std::optional<Zero3Replay> zero3_;
};

}  // namespace headroom
