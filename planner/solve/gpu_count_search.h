// `--gpus auto`: the fewest data-parallel ranks at which a plan fits, and the sharding
// that is fastest at that count. With an exact global batch only the counts that divide
// it are tried. Counts go up 1, 2, 4, 8, then whole nodes of 8; once one
// fits, the counts between it and the one below that did not are tried downwards within
// a node (3; 7, 6, 5), so the count is the fewest, not the next power of two. A scheme
// is solved at a count only once its share of the model state (weights, gradients,
// optimizer states) leaves room on a rank; the full solver decides from there up.
#pragma once

#include "planner/solve/layer.h"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "planner/solve/plan_search.h"

namespace headroom {

// The counts tried: 1, 2, 4, 8, then whole nodes (16, 24, ...) up to 1024 GPUs, then
// blocks of 8 nodes up to 8192 and of 64 nodes beyond, up to max_gpus. Clusters that
// large are rented and built in such blocks, and the coarser steps keep a sweep to the
// 65536-GPU bound at about 350 counts instead of 8192 (minutes, where a count a node
// apart would take a quarter of an hour).
std::vector<int64_t> GpuCountLadder(int64_t max_gpus);
// `count` ranks, on whole nodes of kGpusPerNode beyond one node.
Parallelism ParallelismFor(int64_t count, Sharding sharding);

// The counts solved on the way to the fewest that fits: each count's result, the fastest
// scheme that fits or else the closest attempt (none where every scheme's model-state
// share alone exceeds the budget, so nothing was solved); with `every_count`, every
// ladder count above the fewest too (what `headroom capacity` tabulates).
struct GpuCountSweep {
  std::map<int64_t, std::optional<SearchResult>> at;
  std::optional<int64_t> fewest;
};
GpuCountSweep SweepGpuCounts(const OpGraph& graph, const TrainingConfig& base,
                             const DeviceSpec& device, const SearchOptions& options,
                             const GpuCountOptions& counts, bool every_count);

// When no count that divides the stated global batch fits (an exact SearchGpuCount found
// nothing): the nearest batches, below and above, that a count which fits would run in
// whole sequences per GPU, each verified by a solve; empty when none does. Only `plan`
// reports it, so the searches the advice runs do not pay for it.
std::string NearestGlobalBatchesNote(const OpGraph& graph, const TrainingConfig& base,
                                     const DeviceSpec& device, SearchOptions options,
                                     const GpuCountOptions& counts);

// The solver's result at the fewest ranks that fit (its plan's config carries them), or
// the solve at max_gpus with the scheme that comes closest when none fits.
SearchResult SearchGpuCount(const OpGraph& graph, const TrainingConfig& base,
                            const DeviceSpec& device, const SearchOptions& options,
                            const GpuCountOptions& counts);

}  // namespace headroom
