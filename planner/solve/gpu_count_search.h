// `--gpus auto`: the fewest data-parallel ranks at which a plan fits, and the sharding
// that is fastest at that count. Counts go 1, 2, 4, 8, then whole nodes of 8. For each
// scheme the smallest plan (micro-batch 1, every block checkpointed) decides whether a
// count can fit, found by bisection where memory falls with the count (sharded states);
// the full solver then runs only at the count found, once per scheme that fits there.
#pragma once

#include "planner/solve/layer.h"

#include <cstdint>
#include <vector>

#include "planner/solve/plan_search.h"

namespace headroom {

inline constexpr int64_t kGpusPerNode = 8;

// The counts tried: 1, 2, 4, 8, 16, 24, ... up to max_gpus.
std::vector<int64_t> GpuCountLadder(int64_t max_gpus);
// `count` ranks, on whole nodes of kGpusPerNode beyond one node.
Parallelism ParallelismFor(int64_t count, Sharding sharding);

// The solver's result at the fewest ranks that fit (its plan's config carries them), or
// the solve at max_gpus with the scheme that comes closest when none fits.
SearchResult SearchGpuCount(const OpGraph& graph, const TrainingConfig& base,
                            const DeviceSpec& device, const SearchOptions& options,
                            const GpuCountOptions& counts);

}  // namespace headroom
