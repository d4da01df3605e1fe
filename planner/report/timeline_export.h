// The memory timeline as files people can look at: a CSV of every event with running
// totals per category, and an SVG chart (stacked bytes by category over the step, the
// peak marked, the budget drawn as a line).
#pragma once

#include "planner/report/layer.h"

#include <cstdint>
#include <ostream>

#include "planner/graph/op_graph.h"
#include "planner/simulate/memory_timeline.h"

namespace headroom {

struct TimelineExportInputs {
  const Timeline& timeline;
  const OpGraph& graph;
  int64_t micro_batches = 1;
  int64_t budget_bytes = 0;  // drawn as a line when > 0
  std::string title;
  // The device's allocation granularity (512 B on CUDA): the running totals count each
  // block as the allocator's statistics do, as `plan` does.
  int64_t granularity = 1;
};

void WriteTimelineCsv(const TimelineExportInputs& in, std::ostream& out);
void WriteTimelineSvg(const TimelineExportInputs& in, std::ostream& out);

}  // namespace headroom
