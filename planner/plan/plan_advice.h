// What would make an infeasible request fit: alternatives ranked and quantified — LoRA
// instead of full fine-tuning, an 8-bit optimizer, a shorter sequence, QLoRA, a bigger
// GPU from the catalog — each measured by simulating its smallest plan (micro-batch 1,
// every block checkpointed).
#pragma once

#include "planner/plan/layer.h"

#include <string>
#include <vector>

#include "planner/plan/plan_request.h"
#include "planner/solve/plan_search.h"

namespace headroom {

struct Suggestion {
  std::string change;      // "LoRA rank 16 on q,v instead of full fine-tuning"
  int64_t peak_bytes = 0;  // its smallest plan's peak (device on a GPU, allocated on CPU)
  bool fits = false;       // within the usable memory (after the margin)
};

// Ranked: those that fit first, then by peak.
std::vector<Suggestion> SuggestFixes(const PlanRequest& request, const SearchOptions& options);

}  // namespace headroom
