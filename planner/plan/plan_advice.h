// What would make an infeasible request fit: alternatives ranked and quantified — the
// optimizer's implementation, more GPUs with a sharding, bf16 and an 8-bit optimizer
// (alone and together), LoRA or QLoRA instead of full fine-tuning, a shorter sequence, a
// bigger GPU from the catalog — each measured by simulating its smallest plan
// (micro-batch 1, every block checkpointed; more GPUs by the count search).
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

// Each needs less than the request's own smallest plan; ranked: those that fit first, in
// the order a practitioner accepts changes (the code, more GPUs, the numerics, adapters,
// the data, new hardware), then by peak. `graph` is the request's (for more GPUs).
std::vector<Suggestion> SuggestFixes(const PlanRequest& request, const OpGraph& graph,
                                     const SearchOptions& options);

}  // namespace headroom
