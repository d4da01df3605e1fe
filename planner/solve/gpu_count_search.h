// `--gpus auto`: the fewest data-parallel ranks at which a plan fits, and the sharding
// that is fastest at that count. Counts go 1, 2, 4, 8, then whole nodes of 8. A count
// is solved only once each scheme's share of the model state (weights, gradients,
// optimizer states) leaves room on a rank; the full solver decides from there up.
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
