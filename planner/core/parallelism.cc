#include "planner/core/parallelism.h"

#include <fmt/format.h>

#include "planner/core/limits.h"

namespace headroom {

int64_t DefaultNodes(int64_t gpus) {
  int64_t nodes = (gpus + kGpusPerNode - 1) / kGpusPerNode;
  while (nodes < gpus && gpus % nodes != 0) ++nodes;
  return std::max<int64_t>(1, nodes);
}

std::optional<Error> ValidateParallelism(const Parallelism& p) {
  if (auto error = limits::CheckRange(p.gpus, 1, limits::kMaxGpus, "--gpus")) return error;
  if (auto error = limits::CheckRange(p.nodes, 1, p.gpus, "--nodes")) return error;
  if (p.gpus % p.nodes != 0)
    return Error{fmt::format("--gpus {} is not a whole number of GPUs on each of --nodes {}",
                             p.gpus, p.nodes)};
  if (p.gpus > 1 && !p.distributed())
    return Error{fmt::format(
        "--gpus {} needs a way to split the work: --sharding ddp | zero1 | zero2 | zero3 | "
        "fsdp | fsdp-no-reshard",
        p.gpus)};
  if (p.ddp_bucket_view && !p.ddp_reducer())
    return Error{"--ddp-bucket-view applies to --sharding ddp and zero1 (DDP's reducer)"};
  if (p.sharding == Sharding::kZero3 && p.offload != Offload::kNone)
    return Error{
        "--sharding zero3 with --offload: ZeRO-3's offload (its CPU partitions and "
        "swap buffers) is not replayed yet; plan --sharding zero2 --offload optimizer or "
        "--sharding fsdp --offload optimizer+params"};
  if (p.fsdp_reduce_dtype && !p.fsdp_param_dtype)
    return Error{
        "--fsdp-reduce-dtype is part of a mixed-precision policy: give --fsdp-param-dtype"};
  for (auto dtype : {p.fsdp_param_dtype, p.fsdp_reduce_dtype}) {
    if (dtype && *dtype != DType::kBF16 && *dtype != DType::kF16 && *dtype != DType::kF32)
      return Error{
          fmt::format("--fsdp-param-dtype and --fsdp-reduce-dtype take bf16, fp16 or fp32 (got {})",
                      DTypeName(*dtype))};
  }
  if (p.fsdp_param_dtype && p.sharding != Sharding::kNone && !p.fsdp())
    return Error{
        fmt::format("--fsdp-param-dtype applies to --sharding fsdp and fsdp-no-reshard "
                    "(FSDP2's MixedPrecisionPolicy), not {}",
                    ShardingName(p.sharding))};
  if (p.fsdp_param_dtype && p.offload != Offload::kNone)
    return Error{
        "--fsdp-param-dtype with --offload: the casts of offloaded shards (copied to the "
        "device one parameter at a time) are not replayed"};
  if (p.rank && (*p.rank < 0 || *p.rank >= p.gpus))
    return Error{
        fmt::format("--rank {} is not one of the {} ranks (0 to {})", *p.rank, p.gpus, p.gpus - 1)};
  if (p.offload == Offload::kOptimizerAndParams && p.sharding != Sharding::kZero3 && !p.fsdp())
    return Error{
        "--offload optimizer+params needs sharded parameters: --sharding zero3, fsdp "
        "or fsdp-no-reshard"};
  if (p.offload == Offload::kOptimizer && p.fsdp())
    return Error{
        "FSDP2's CPUOffloadPolicy moves the parameter shards with the optimizer "
        "states: use --offload optimizer+params"};
  if (p.offload != Offload::kNone && !p.deepspeed_zero() && !p.fsdp())
    return Error{
        fmt::format("--offload {} needs --sharding zero2, zero3, fsdp or "
                    "fsdp-no-reshard (the engines that offload)",
                    OffloadName(p.offload))};
  return std::nullopt;
}

}  // namespace headroom
