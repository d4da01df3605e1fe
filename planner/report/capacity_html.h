// `headroom capacity --html`: one self-contained page for a person deciding what to buy
// or rent. The answer in a sentence first, then the time-against-cost chart with its
// Pareto front, the table, a memory bar per configuration split by category, and the
// assumptions (prices with their sources and dates, the efficiency factors behind the
// time estimates, MoE routing). Inline SVG and CSS only: no script, no network.
#pragma once

#include "planner/report/layer.h"

#include <string>

#include "planner/report/capacity_report.h"

namespace headroom {

std::string CapacityHtml(const CapacitySubject& subject, const CapacityReport& report,
                         const PriceCatalog& prices);

}  // namespace headroom
