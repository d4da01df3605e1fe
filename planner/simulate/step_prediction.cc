#include "planner/simulate/step_prediction.h"

#include "planner/simulate/caching_allocator_model.h"
#include "planner/simulate/internal/simulation_tables_impl.h"
#include "planner/simulate/live_bytes.h"
#include "planner/simulate/step_simulator.h"

namespace headroom {

StepPrediction PredictStep(const OpGraph& graph, const TrainingConfig& config,
                           const std::vector<bool>& checkpointed, const DeviceSpec& device) {
  return PredictStep(SimulationTables(graph, config), checkpointed, device);
}

StepPrediction PredictStep(const SimulationTables& tables, const std::vector<bool>& checkpointed,
                           const DeviceSpec& device) {
  const OpGraph& graph = tables.graph();
  const TrainingConfig& config = tables.config();
  StepPrediction p;
  p.checkpointed = checkpointed;
  p.params_total = graph.ParameterCount();
  p.params_trainable = graph.TrainableParameterCount();
  p.rank = tables.impl().shards.rank;
  p.offload_cpu_bytes = tables.OffloadCpuBytes();
  p.activation_offload_host_bytes = tables.ActivationOffloadHostBytes(checkpointed);
  p.budget_bytes = device.memory_bytes;
  SimulationOptions options;
  options.cublas_workspace_bytes = device.CublasWorkspaceBytes();
  p.timeline = SimulateSteps(tables, checkpointed, options);

  LiveBytes live(p.timeline, device.AllocationGranularity());
  CachingAllocatorModel allocator({.capacity_bytes = device.memory_bytes - device.context_bytes});
  if (device.is_cuda) {
    ReplayInto(p.timeline.events, 0, p.timeline.events.size(), live, allocator);
  } else {
    ReplayInto(p.timeline.events, 0, p.timeline.events.size(), live);
  }
  p.allocated_peak_bytes = live.live().peak;
  p.breakdown = live.breakdown_at_peak();
  p.peak_phase = p.timeline.phases[live.peak_phase()];
  p.peak_phase_text = DescribePhase(p.peak_phase, graph, config.grad_accum_steps);
  const auto& by_step = live.peak_by_step();
  p.first_step_peak_bytes = by_step.size() > 1 ? by_step[1] : 0;
  p.steady_step_peak_bytes = by_step.size() > 2 ? by_step[2] : p.first_step_peak_bytes;

  if (device.is_cuda) {
    p.reserved_peak_bytes = allocator.reserved().peak;
    p.device_peak_bytes = p.reserved_peak_bytes + device.context_bytes;
    p.fits = !allocator.out_of_memory();
    if (allocator.out_of_memory()) {
      p.oom_phase_text =
          DescribePhase(p.timeline.phases[allocator.oom_phase()], graph, config.grad_accum_steps);
    }
  } else {
    p.reserved_peak_bytes = p.allocated_peak_bytes;
    p.device_peak_bytes = p.allocated_peak_bytes;
    p.fits = p.allocated_peak_bytes <= device.memory_bytes;
  }
  if (const int64_t other = tables.impl().shards.other_candidate_rank; other >= 0) {
    // Two ranks may be the busiest (ZeRO-2): replay the other too, keep the higher.
    TrainingConfig at_other = config;
    at_other.parallel.rank = other;
    StepPrediction q = PredictStep(SimulationTables(graph, at_other), checkpointed, device);
    if (q.device_peak_bytes > p.device_peak_bytes) return q;
  }
  return p;
}

}  // namespace headroom
