// One rank's optimizer step, replayed into the step simulator's ledger from each
// parameter's costs (optimizer_model.h): the states on the first step, then each update's
// temporaries, then the group's (foreach and fused work on all parameters at once).
#pragma once

#include "planner/simulate/internal/layer.h"

#include <cstddef>
#include <cstdint>

#include "planner/simulate/internal/buffer_ledger.h"
#include "planner/simulate/internal/simulation_tables_impl.h"

namespace headroom {

class OptimizerReplay {
 public:
  // `offloaded`: the states live and step on the CPU (--offload): nothing on the device.
  OptimizerReplay(const SimulationTables::Impl& tables, bool offloaded, BufferLedger& ledger)
      : tables_(tables), offloaded_(offloaded), ledger_(ledger) {}

  // torch.optim creates every parameter's states (and 0-d step tensors) before updating
  // any; LibTorch's optimizers create each parameter's just before updating it.
  void Step(int step) {
    const bool states_first = tables_.states.target().torch_optim;
    int64_t group_temp_bytes = 0;
    for (size_t i = 0; i < tables_.parameters.size(); ++i) {
      if (!UpdatesHere(i)) continue;
      const OptimizerParamCost& cost = tables_.optimizer_costs[i];
      if (step == 1 && states_first) AllocateStates(cost);
      group_temp_bytes += cost.group_temp_bytes;
    }
    for (size_t i = 0; i < tables_.parameters.size(); ++i) {
      if (!UpdatesHere(i)) continue;
      const OptimizerParamCost& cost = tables_.optimizer_costs[i];
      if (step == 1 && !states_first) AllocateStates(cost);
      if (cost.step_temp_bytes > 0)
        ledger_.Release(ledger_.Acquire(cost.step_temp_bytes, Category::kTemporaries));
    }
    if (group_temp_bytes > 0)
      ledger_.Release(ledger_.Acquire(group_temp_bytes, Category::kTemporaries));
  }

 private:
  // Whether this rank's optimizer updates parameter i on the device (ZeRO-1 updates its
  // partition and receives the others' broadcast in place; offloading steps on the CPU).
  bool UpdatesHere(size_t i) const {
    return tables_.trainable[tables_.parameters[i].value] &&
           tables_.shards.owns_optimizer_state[i] && !offloaded_;
  }

  void AllocateStates(const OptimizerParamCost& cost) {
    for (int64_t bytes : cost.state_bytes) ledger_.AcquirePersistent(bytes, Category::kOptimizer);
    if (cost.step_tensor_bytes > 0)
      ledger_.AcquirePersistent(cost.step_tensor_bytes, Category::kOptimizer);
  }

  const SimulationTables::Impl& tables_;
  const bool offloaded_;
  BufferLedger& ledger_;
};

}  // namespace headroom
