#include "planner/chain_memory_model.h"

#include <algorithm>

#include "planner/op_cost.h"

namespace headroom {

ChainProfile ProfileChain(const OpGraph& graph, const TensorStates& states,
                          const Timeline& timeline, const ShapeEnv& env, int64_t granularity,
                          int64_t state_bytes) {
  const auto& blocks = graph.blocks();
  const int n = static_cast<int>(blocks.size());
  auto round_up = [&](int64_t b) { return (b + granularity - 1) / granularity * granularity; };
  ChainProfile p;
  p.block_peak.assign(n, 0);
  p.stored.assign(n, 0);
  p.kept.assign(n, 0);
  p.grad_held.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    const int64_t output = round_up(states.Bytes(graph, graph.StorageOf(blocks[i].output), env));
    // A checkpointed block's backward holds its output's gradient to its end: extra
    // memory unless the last op passes that gradient straight on (a residual add).
    const BackwardCost last = CostBackward(graph, graph.op(blocks[i].last_op), states, env);
    const bool passed_on = std::find(last.input_grads.begin(), last.input_grads.end(),
                                     GradFlow::kPassThrough) != last.input_grads.end();
    p.kept[i] = output;
    p.grad_held[i] = passed_on ? 0 : output;
  }
  const int first_block_op = n > 0 ? blocks.front().first_op.value : graph.num_ops();

  struct Origin {
    int block;
    bool forward;
    int64_t bytes;
    bool live;
  };
  std::vector<Origin> origin;
  int64_t live = 0;
  bool stored_measured = false;
  for (const MemoryEvent& e : timeline.events) {
    const Phase& phase = timeline.phases[e.phase];
    if (!stored_measured && phase.kind == Phase::Kind::kBackward) {
      for (const Origin& o : origin) {
        if (o.live && o.forward && o.block >= 0) p.stored[o.block] += o.bytes;
      }
      stored_measured = true;
    }
    const int64_t bytes = round_up(e.per_sample ? e.bytes * env.micro_batch : e.bytes);
    if (e.kind == MemoryEvent::Kind::kAlloc) {
      live += bytes;
      if (origin.size() <= static_cast<size_t>(e.buffer)) origin.resize(e.buffer + 1);
      origin[e.buffer] = {phase.block, phase.kind == Phase::Kind::kForward, bytes, true};
    } else {
      live -= bytes;
      origin[e.buffer].live = false;
    }
    int64_t* region = &p.fixed_peak;
    if (phase.block >= 0) {
      region = &p.block_peak[phase.block];
    } else if (phase.op.valid() && phase.op.value > first_block_op) {
      region = &p.head_peak;
    }
    const bool optimizer =
        phase.kind == Phase::Kind::kOptimizerStep || phase.kind == Phase::Kind::kZeroGrad;
    *region = std::max(*region, live + (optimizer ? 0 : state_bytes));
  }
  return p;
}

int64_t ChainMemoryModel::PeakUnits(const std::vector<bool>& checkpointed) const {
  int64_t peak = fixed_peak;
  int64_t saved_before = 0;
  for (int i = 0; i < num_blocks(); ++i) {
    peak =
        std::max(peak, block_peak[i] - saved_before + (checkpointed[i] ? recompute_extra[i] : 0));
    if (checkpointed[i]) saved_before += saved[i];
  }
  return std::max(peak, head_peak - saved_before);
}

ChainMemoryModel ToUnits(const ChainProfile& p, const std::vector<double>& recompute_cost) {
  int64_t total_saved = 0;
  for (size_t i = 0; i < p.stored.size(); ++i)
    total_saved += std::max<int64_t>(0, p.stored[i] - p.kept[i]);
  ChainMemoryModel m;
  m.unit_bytes = std::max<int64_t>(1, (total_saved + 4095) / 4096);
  const int64_t u = m.unit_bytes;
  auto up = [u](int64_t b) { return (b + u - 1) / u; };
  m.fixed_peak = up(p.fixed_peak);
  m.head_peak = up(p.head_peak);
  for (size_t i = 0; i < p.stored.size(); ++i) {
    m.block_peak.push_back(up(p.block_peak[i]));
    m.saved.push_back(std::max<int64_t>(0, p.stored[i] - p.kept[i]) / u);
    m.recompute_extra.push_back(up(p.kept[i] + p.grad_held[i]));
  }
  m.recompute_cost = recompute_cost;
  return m;
}

}  // namespace headroom
