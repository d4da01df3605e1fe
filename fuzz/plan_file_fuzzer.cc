// The plan file (`train --plan plan.yaml`): any text either fails with an error or gives
// a plan within limits.h's bounds that writes back and reads back to the same plan.
#include <string>

#include "fuzz/fuzz_input.h"
#include "planner/core/limits.h"
#include "planner/plan/plan_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const Result<PlanFile> plan = ParsePlanYaml(fuzz::AsText(data, size), "plan.yaml");
  if (!plan) return 0;
  const TrainingConfig& c = plan->config;
  fuzz::Require(c.micro_batch >= 1 && c.micro_batch <= limits::kMaxBatch, "micro_batch bounded");
  fuzz::Require(c.seq_len >= 1 && c.seq_len <= limits::kMaxPositions, "seq_len bounded");
  const std::string written = WritePlanYaml(*plan);
  const Result<PlanFile> again = ParsePlanYaml(written, "again.yaml");
  fuzz::Require(again.ok(), "a plan that was read can be written and read again");
  fuzz::Require(WritePlanYaml(*again) == written, "and reads back to the same plan");
  return 0;
}
