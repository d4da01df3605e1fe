// Time of the collectives a data-parallel step runs, from the bytes each moves and the
// bandwidth between the ranks, and how much of it the backward and forward hide.
//
// Ring collectives, the nccl-tests convention: an all-reduce moves 2(N-1)/N of its bytes
// through each rank's link, an all-gather or a reduce-scatter (N-1)/N. Within a node
// that link is the GPU's (link_gbps), across nodes its share of the network
// (network_gbps), at the efficiencies Calculon uses for NVLink (0.65) and InfiniBand
// (0.9).
//   ddp      one all-reduce of the gradients per optimizer step (no_sync on the other
//            micro-batches), overlapped with the last backward;
//   zero1    that all-reduce, then each rank broadcasts the parameters it updated
//            (ZeroRedundancyOptimizer._sync_params), exposed after the step;
//   fsdp     per micro-batch an all-gather of the parameters in the forward, another in
//            the backward (fsdp-no-reshard: none) and a reduce-scatter of the trainable
//            gradients, each overlapped with the compute of its pass.
#pragma once

#include "planner/solve/layer.h"

#include <cstdint>

#include "planner/core/gpu_catalog.h"
#include "planner/core/parallelism.h"

namespace headroom {

struct CommTime {
  double total_seconds = 0;    // all collectives of one optimizer step
  double exposed_seconds = 0;  // what compute does not hide
};

struct CommVolume {
  double param_bytes = 0;      // every parameter, as stored
  double trainable_bytes = 0;  // the gradients reduced
};

// Seconds to move `bytes` through one rank's link at `fraction` of the collective's
// volume (2(N-1)/N, (N-1)/N).
double CollectiveSeconds(double bytes, double fraction, const Parallelism& p,
                         const DeviceSpec& device);

// `forward_seconds` and `backward_seconds` are one micro-batch's compute.
CommTime EstimateComm(const Parallelism& p, const CommVolume& volume, int64_t grad_accum_steps,
                      double forward_seconds, double backward_seconds, const DeviceSpec& device);

}  // namespace headroom
