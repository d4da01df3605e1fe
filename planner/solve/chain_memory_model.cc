#include "planner/solve/chain_memory_model.h"

#include <algorithm>

#include "planner/simulate/op_cost.h"

namespace headroom {

ChainProfiler::ChainProfiler(const OpGraph& graph, const TensorStates& states,
                             const Timeline& timeline, int64_t granularity, int64_t state_bytes)
    : graph_(graph), states_(states), granularity_(granularity), state_bytes_(state_bytes) {
  const auto& blocks = graph.blocks();
  for (const BlockSegment& block : blocks) {
    // A checkpointed block's backward holds its output's gradient to its end: extra
    // memory unless the last op passes that gradient straight on (a residual add).
    const BackwardCost last = CostBackward(graph, graph.op(block.last_op), states, {});
    grad_passed_on_.push_back(std::find(last.input_grads.begin(), last.input_grads.end(),
                                        GradFlow::kPassThrough) != last.input_grads.end());
  }
  const int first_block_op = blocks.empty() ? graph.num_ops() : blocks.front().first_op.value;

  // Which block's forward allocated each live buffer, until the first backward starts.
  struct Origin {
    int block = -1;
    bool forward = false;
    bool live = false;
    int64_t bytes = 0;
    bool per_sample = false;
  };
  std::vector<Origin> origin;
  bool stored_measured = false;
  events_.reserve(timeline.events.size());
  for (const MemoryEvent& e : timeline.events) {
    const Phase& phase = timeline.phases[e.phase];
    const bool alloc = e.kind == MemoryEvent::Kind::kAlloc;
    if (!stored_measured) {
      if (phase.kind == Phase::Kind::kBackward) {
        for (const Origin& o : origin) {
          if (o.live && o.forward && o.block >= 0)
            stored_.push_back({o.block, o.bytes, o.per_sample});
        }
        stored_measured = true;
      } else {
        if (origin.size() <= static_cast<size_t>(e.buffer)) origin.resize(e.buffer + 1);
        origin[e.buffer] = {phase.block, phase.kind == Phase::Kind::kForward, alloc, e.bytes,
                            e.per_sample};
      }
    }
    int32_t region = kFixed;
    if (phase.block >= 0) {
      region = kFirstBlock + phase.block;
    } else if (phase.op.valid() && phase.op.value > first_block_op) {
      region = kHead;
    }
    events_.push_back(
        {e.bytes, region, alloc, e.per_sample,
         phase.kind == Phase::Kind::kOptimizerStep || phase.kind == Phase::Kind::kZeroGrad});
  }
}

ChainProfile ChainProfiler::Profile(const ShapeEnv& env) const {
  const auto& blocks = graph_.blocks();
  const int n = static_cast<int>(blocks.size());
  ChainProfile p;
  p.stored.assign(n, 0);
  p.kept.assign(n, 0);
  p.grad_held.assign(n, 0);
  p.recompute_held.assign(n, 0);
  const bool reentrant = states_.target().reentrant_checkpoint;
  for (int i = 0; i < n; ++i) {
    const int64_t output = RoundUp(states_.Bytes(graph_, graph_.StorageOf(blocks[i].output), env));
    p.kept[i] = output;
    p.grad_held[i] = grad_passed_on_[i] ? 0 : output;
    // Non-reentrant recomputation re-makes neither the output nor holds its gradient.
    p.recompute_held[i] = reentrant ? p.kept[i] + p.grad_held[i] : 0;
  }
  const int64_t b = env.micro_batch;
  for (const StoredBuffer& s : stored_)
    p.stored[s.block] += RoundUp(s.per_sample ? s.bytes * b : s.bytes);

  std::vector<int64_t> peak(kFirstBlock + n, 0);
  int64_t live = 0;
  for (const Event& e : events_) {
    const int64_t bytes = RoundUp(e.per_sample ? e.bytes * b : e.bytes);
    live += e.alloc ? bytes : -bytes;
    int64_t& region = peak[e.region];
    region = std::max(region, live + (e.optimizer ? 0 : state_bytes_));
  }
  p.fixed_peak = peak[kFixed];
  p.head_peak = peak[kHead];
  p.block_peak.assign(peak.begin() + kFirstBlock, peak.end());
  return p;
}

ChainProfile ProfileChain(const OpGraph& graph, const TensorStates& states,
                          const Timeline& timeline, const ShapeEnv& env, int64_t granularity,
                          int64_t state_bytes) {
  return ChainProfiler(graph, states, timeline, granularity, state_bytes).Profile(env);
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
    m.recompute_extra.push_back(up(p.recompute_held[i]));
  }
  m.recompute_cost = recompute_cost;
  return m;
}

}  // namespace headroom
