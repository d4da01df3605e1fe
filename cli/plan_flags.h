// The flags shared by `plan` and `simulate`, and their conversion into a PlanRequest.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "planner/plan/plan_request.h"
#include "planner/solve/plan_search.h"
#include "planner/core/result.h"

namespace headroom {

struct PlanFlags {
  std::string model;
  std::string gpu;
  std::string gpu_mem;
  std::string device;
  int64_t seq_len = 512;
  int64_t micro_batch = 1;
  int64_t grad_accum = 1;
  std::string precision;  // empty: amp-bf16 where supported, else amp-fp16
  std::string optimizer = "adamw";
  int64_t lora_rank = 0;
  double lora_alpha = 0;  // 0: 2 * rank
  double lora_dropout = 0;
  std::vector<std::string> lora_targets;
  bool qlora = false;
  std::string checkpoint = "none";
  std::string attention = "sdpa";
  std::string stack;           // empty: pytorch (plan), headroom (train)
  std::string optimizer_impl;  // empty: what the stack picks on the device
  std::string base_dtype;      // empty: the stack's recipe
  std::string cpu_bf16;        // empty: this machine's CPU (with --device cpu)
  bool json = false;
  // The solver (issue: the fastest plan that fits).
  bool auto_plan = false;          // --auto; also implied when --micro-batch is not given
  bool micro_batch_given = false;  // set after parsing
  bool checkpoint_given = false;   // set after parsing
  bool grad_accum_given = false;   // set after parsing
  int64_t global_batch = 0;        // 0: micro-batch x grad-accum, or 8 when solving
  double margin = kDefaultMargin;
  std::string output_plan;  // -o plan.yaml
  std::string emit;         // hf | deepspeed
};

// Records which options the user actually gave (defaults mean "let the solver decide").
void NoteGivenFlags(const CLI::App& command, PlanFlags& flags);

// Bad input: one line on stderr, exit code 2.
inline constexpr int kUsageError = 2;
int ReportUsageError(const std::string& message);

void AddPlanFlags(CLI::App& command, PlanFlags& flags);
Result<PlanRequest> ToPlanRequest(const PlanFlags& flags);

}  // namespace headroom
