// The flags shared by `plan`, `simulate` and `train`, and their conversion into a
// PlanRequest and the solver's options. An unset optional means "not given": the
// default, or the solver's choice.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "planner/plan/plan_request.h"
#include "planner/report/stack_exports.h"
#include "planner/solve/plan_search.h"

namespace headroom {

struct PlanFlags {
  std::string model;
  bool trust_remote_code = false;  // import a model_type from the code its config names
  std::optional<std::string> gpu;
  std::optional<std::string> gpu_mem;
  std::optional<std::string> device;
  int64_t seq_len = 512;
  std::optional<int64_t> micro_batch;  // unset: the solver chooses
  std::optional<int64_t> grad_accum;
  std::optional<Precision> precision;  // unset: amp-bf16 where supported, else amp-fp16
  bool solve_precision = false;        // --precision auto
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  std::optional<int64_t> lora_rank;    // unset: 16 with LoRA flags, else full fine-tuning
  std::optional<double> lora_alpha;    // unset: 2 * rank
  std::optional<double> lora_dropout;  // unset: 0
  std::vector<std::string> lora_targets;
  bool qlora = false;
  std::optional<std::string> checkpoint;  // unset: none, or the solver's choice
  AttentionImpl attention = AttentionImpl::kSdpa;
  std::optional<std::string> moe_routing;       // unset: balanced (mixtures of experts only)
  int64_t images = 0;                           // images per sample (a vision-language model)
  std::string kernels;                          // kernel packages, "fla" (an imported model)
  std::string loss = "full";                    // full | chunked[:N]
  Packing packing = Packing::kPadded;
  bool activation_offload = false;
  std::optional<int64_t> tokens_per_micro_batch;  // --packing padding-free: the row's tokens
  std::optional<Stack> stack;                   // unset: pytorch (plan), headroom (train)
  std::optional<OptimizerImpl> optimizer_impl;  // unset: what the stack picks on the device
  std::optional<DType> base_dtype;              // unset: the stack's recipe
  std::optional<CpuBf16> cpu_bf16;              // unset: this machine's CPU (--device cpu)
  std::optional<int> cpu_threads;               // unset: this machine's (--device cpu)
  int64_t gpus = 1;
  bool gpus_auto = false;  // --gpus auto: the solver chooses the count and the sharding
  int64_t max_gpus = 1024;
  std::optional<int64_t> nodes;      // unset: DefaultNodes(--gpus)
  std::optional<Sharding> sharding;  // unset: none on one rank
  bool ddp_bucket_view = false;
  std::optional<int64_t> rank;  // --rank: replay this rank instead of the busiest
  Offload offload = Offload::kNone;
  // unset: accelerate's for --stack hf-trainer and the exports that run through it
  std::optional<FsdpWrap> fsdp_wrap;
  // FSDP2's MixedPrecisionPolicy; unset: none, or accelerate's with its stack and amp-bf16
  std::optional<DType> fsdp_param_dtype, fsdp_reduce_dtype;
  DeepSpeedZeroKnobs deepspeed;  // --ds-*: DeepSpeed's defaults unless given
  bool json = false;
  bool auto_plan = false;                  // --auto; also implied without --micro-batch
  std::optional<int64_t> global_batch;     // unset: micro-batch x grad-accum, or the default
  std::optional<double> margin;            // unset: kDefaultMargin
  std::optional<std::string> output_plan;  // -o plan.yaml
  std::optional<ExportTarget> emit;
};

// Bad input: one line on stderr, exit code 2.
inline constexpr int kUsageError = 2;
int ReportUsageError(const std::string& message);
// A valid run that failed (a write, the training itself): one line, exit code 1.
inline constexpr int kRunFailure = 1;
int ReportRunFailure(const std::string& message);
// The first line of an exception's message (LibTorch appends a backtrace).
std::string FirstLine(const std::string& text);
// Files a command will write, as (flag, path); no path is a flag not given, and an empty
// one is an error. The error names the flag of the first that cannot be written; checked
// before the work, so a bad path costs no solver or training time.
std::optional<Error> CheckOutputFlags(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& outputs);

// A report on stdout, its control bytes escaped (planner/core/text_escape.h): a name in it cannot
// move the cursor or rewrite a line.
void PrintReport(const std::string& text);

// The flags that state a request (model, device, training config): plan, simulate, train.
void AddRequestFlags(CLI::App& command, PlanFlags& flags);
// The solver's choices: --auto (described by `auto_help`), --global-batch, --margin.
void AddSolverChoiceFlags(CLI::App& command, PlanFlags& flags, const std::string& auto_help);
// The request flags plus the solver's and the outputs': plan and simulate.
void AddPlanFlags(CLI::App& command, PlanFlags& flags);
Result<PlanRequest> ToPlanRequest(const PlanFlags& flags);
// The solver's options, or none when the flags state a plan to predict as it is.
// Notes for the user (a precision an export cannot run) go to stderr.
Result<std::optional<SearchOptions>> ToSearchOptions(const PlanFlags& flags,
                                                     const PlanRequest& request);

}  // namespace headroom
