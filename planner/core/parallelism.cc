#include "planner/core/parallelism.h"

#include <fmt/format.h>

#include "planner/core/limits.h"

namespace headroom {

std::optional<Error> ValidateParallelism(const Parallelism& p) {
  if (auto error = limits::CheckRange(p.gpus, 1, limits::kMaxGpus, "--gpus")) return error;
  if (auto error = limits::CheckRange(p.nodes, 1, p.gpus, "--nodes")) return error;
  if (p.gpus % p.nodes != 0)
    return Error{fmt::format("--gpus {} is not a whole number of GPUs on each of --nodes {}",
                             p.gpus, p.nodes)};
  if (p.gpus > 1 && !p.distributed())
    return Error{fmt::format(
        "--gpus {} needs a way to split the work: --sharding ddp | zero1 | fsdp | "
        "fsdp-no-reshard",
        p.gpus)};
  if (p.ddp_bucket_view && !p.ddp_reducer())
    return Error{"--ddp-bucket-view applies to --sharding ddp and zero1 (DDP's reducer)"};
  return std::nullopt;
}

}  // namespace headroom
