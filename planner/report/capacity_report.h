// The outputs of `headroom capacity`: the answer in one sentence, the text table, JSON
// and CSV for scripts (the HTML report for people is capacity_html.h).
#pragma once

#include "planner/report/layer.h"

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/core/price_catalog.h"
#include "planner/plan/capacity_sweep.h"

namespace headroom {

// What a report is about, for its headings: "llama-3-70b, LoRA r16, seq 4096, global
// batch 64, 1e9 tokens".
struct CapacitySubject {
  std::string model;
  std::string training;     // fine-tune, precision request, sequence length, global batch
  std::string moe_routing;  // the routing assumed; empty for a dense model
};

// "cheapest: 2x h100-80gb, 31 h, $236; fastest: 8x h200, 6.1 h, $342; fewest: 1x h200",
// or why there is no answer.
std::string CapacityHeadline(const CapacityReport& report);
// The GPU types of a report's rows, each once, in the order of the rows.
std::vector<std::string> GpuTypesOf(const CapacityReport& report);
// The links a row's step time assumes: none for one GPU.
struct Interconnect {
  int64_t nodes = 1;
  int64_t gpus_per_node = 1;
  double link_gbps = 0;                // per GPU and direction, within a node
  std::optional<double> network_gbps;  // between nodes, when there are several
};
std::optional<Interconnect> InterconnectOf(const CapacityRow& row);
std::string InterconnectText(const Interconnect& links);  // "2x8 @ 450/50 GB/s"
// A row's plan in a few words: "fsdp, 2x8 @ 450/50 GB/s, mb 1 x 16, amp-bf16, ckpt 61/80".
std::string PlanSummary(const CapacityRow& row);

std::string FormatCapacityText(const CapacitySubject& subject, const CapacityReport& report,
                               const PriceCatalog& prices);
nlohmann::json CapacityJson(const CapacitySubject& subject, const CapacityReport& report,
                            const PriceCatalog& prices);
std::string CapacityCsv(const CapacityReport& report);

// The assumptions every output states: the price file's date and origin, the basis
// (cloud or owned) and, per GPU, the price used with its source and date.
std::string PriceBasisText(const CapacityReport& report, const PriceCatalog& prices);

}  // namespace headroom
