// The process's heap kept for reuse. A prediction allocates arrays sized by the graph
// (tens of thousands of events and per-op costs for an imported model) and frees them when
// it returns. glibc's defaults serve such blocks from fresh mappings and hand the heap's
// free top back to the kernel, so the next prediction faults every page in again: a
// fifth to a third of a prediction's time, varying with what ran before it. The planning
// commands and the benchmarks keep freed memory in the heap instead (`train` does not: its
// host memory is its tensors') (docs/graph-file.md, speed).
#pragma once

namespace headroom {

// Blocks under 32 MiB come from the heap, whose freed top is kept up to 1 GiB. No effect
// outside glibc.
void KeepFreedHeapForReuse();

}  // namespace headroom
