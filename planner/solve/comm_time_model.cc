#include "planner/solve/comm_time_model.h"

#include <algorithm>

namespace headroom {
namespace {

constexpr double kLinkEfficiency = 0.65;    // Calculon's NVLink default
constexpr double kNetworkEfficiency = 0.9;  // Calculon's InfiniBand default

double Hidden(double comm, double compute) { return std::max(0.0, comm - compute); }

}  // namespace

double CollectiveSeconds(double bytes, double fraction, const Parallelism& p,
                         const DeviceSpec& device) {
  if (p.gpus <= 1 || bytes <= 0) return 0;
  const double rate = p.nodes > 1 ? device.network_gbps * 1e9 * kNetworkEfficiency
                                  : device.link_gbps * 1e9 * kLinkEfficiency;
  return rate > 0 ? bytes * fraction / rate : 0;
}

CommTime EstimateComm(const Parallelism& p, const CommVolume& v, int64_t grad_accum_steps,
                      double forward_seconds, double backward_seconds, const DeviceSpec& device) {
  CommTime t;
  if (!p.distributed() || p.gpus <= 1) return t;
  const double n = static_cast<double>(p.gpus);
  const double ring = (n - 1) / n;
  const double accum = static_cast<double>(grad_accum_steps);
  if (p.ddp_reducer()) {
    const double all_reduce = CollectiveSeconds(v.trainable_bytes, 2 * ring, p, device);
    t.total_seconds = all_reduce;
    t.exposed_seconds = Hidden(all_reduce, backward_seconds);
    if (p.sharding == Sharding::kZero1) {
      const double broadcast = CollectiveSeconds(v.trainable_bytes, ring, p, device);
      t.total_seconds += broadcast;
      t.exposed_seconds += broadcast;
    }
    return t;
  }
  if (p.sharding == Sharding::kZero2) {
    // Each micro-step all-reduces its gradient buckets during backward (DeepSpeed's
    // use_multi_rank_bucket_allreduce); each step all-gathers the updated partitions,
    // after the update, with nothing to hide behind.
    const double all_reduce = CollectiveSeconds(v.trainable_bytes, 2 * ring, p, device);
    const double all_gather = CollectiveSeconds(v.trainable_bytes, ring, p, device);
    t.total_seconds = accum * all_reduce + all_gather;
    t.exposed_seconds = accum * Hidden(all_reduce, backward_seconds) + all_gather;
    return t;
  }
  const double gather = CollectiveSeconds(v.param_bytes, ring, p, device);
  const double reduce = CollectiveSeconds(v.trainable_bytes, ring, p, device);
  // ZeRO-3 gathers again for backward what it released after forward, as FSDP does.
  const double backward_gather =
      p.sharding == Sharding::kFsdp || p.sharding == Sharding::kZero3 ? gather : 0.0;
  t.total_seconds = accum * (gather + backward_gather + reduce);
  t.exposed_seconds = accum * (Hidden(gather, forward_seconds) +
                               Hidden(backward_gather + reduce, backward_seconds));
  return t;
}

}  // namespace headroom
