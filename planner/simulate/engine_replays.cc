#include "planner/simulate/internal/engine_replays.h"

namespace headroom {

EngineReplays::EngineReplays(const SimulationTables::Impl& tables, const TrainingConfig& config,
                             bool optimizer_offloaded, const ReplayMemory& memory) {
  const Parallelism& p = config.parallel;
  const bool gloo = !config.kernels.cuda;
  if (p.fsdp()) fsdp_.emplace(tables.shards, /*gloo_scratch=*/gloo, optimizer_offloaded, memory);
  if (p.sharding == Sharding::kZero2) {
    zero_.emplace(tables.shards.zero,
                  ZeroReplay::Sizes{.reduce_bucket_size = p.deepspeed.reduce_bucket_size,
                                    .overlap_comm = p.overlap_comm(),
                                    .gloo = gloo,
                                    .offload_optimizer = optimizer_offloaded},
                  tables.zero_flat_cost, memory);
    zero_->Setup();
  }
  if (p.sharding == Sharding::kZero3) {
    const DeepSpeedZeroKnobs& ds = p.deepspeed;
    zero3_.emplace(tables.shards.zero3,
                   Zero3Replay::Sizes{.reduce_bucket_size = ds.reduce_bucket_size,
                                      .prefetch_bucket_size = ds.stage3_prefetch_bucket_size,
                                      .max_live_parameters = ds.stage3_max_live_parameters,
                                      .gloo = gloo},
                   tables.zero3_sub_group_costs, memory);
    zero3_->Setup();
  }
}

void EngineReplays::StartForward() {
  if (fsdp_) fsdp_->GatherForward(fsdp_->root());
  if (zero3_) zero3_->StartForward();
}

void EngineReplays::BeforeOpForward(int op) {
  if (fsdp_) fsdp_->BeforeOpForward(op);
  if (zero3_) zero3_->BeforeOpForward(op);
}

void EngineReplays::AfterOpForward(int op) {
  if (fsdp_) fsdp_->AfterOpForward(op);
  if (zero3_) zero3_->AfterOpForward(op);
}

void EngineReplays::EndForward() {
  if (fsdp_) fsdp_->EndForward();
}

void EngineReplays::BeforeRecomputedOp(int op) {
  if (zero3_) zero3_->BeforeOpForward(op);
}

void EngineReplays::AfterRecomputedOp(int op) {
  if (zero3_) zero3_->AfterOpForward(op);
}

void EngineReplays::StartBackward() {
  if (fsdp_) fsdp_->PreBackward(fsdp_->root());
  if (zero3_) zero3_->StartBackward();
}

void EngineReplays::BeforeOpBackward(int op) {
  if (fsdp_) fsdp_->BeforeOpBackward(op);
  if (zero3_) zero3_->BeforeOpBackward(op);
}

void EngineReplays::AfterOpBackward(int op) {
  if (fsdp_) fsdp_->AfterOpBackward(op);
  if (zero3_) zero3_->AfterOpBackward(op);
}

void EngineReplays::EndBackward() {
  if (fsdp_) fsdp_->EndBackward();
  if (zero_) zero_->EndBackward();
  if (zero3_) zero3_->EndBackward();
}

bool EngineReplays::TakeGradient(size_t i, int64_t grad) {
  if (zero_) zero_->GradientReady(i, grad);
  if (zero3_) zero3_->GradientReady(i, grad);
  return zero_ || zero3_;
}

void EngineReplays::OptimizerStep(int step) {
  if (zero_) zero_->OptimizerStep(step);
  if (zero3_) zero3_->OptimizerStep(step);
}

void EngineReplays::ZeroGrad() {
  if (fsdp_) fsdp_->ZeroGrad();
}

}  // namespace headroom
