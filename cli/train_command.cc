// (No fmt here: LibTorch's include directory carries its own, newer copy.)
#include "cli/train_command.h"

#include <cstdio>
#include <filesystem>
#include <limits>
#include <vector>

#include "cli/numeric_option.h"
#include "models/build_graph.h"
#include "models/model_import.h"
#include "planner/core/byte_units.h"
#include "planner/core/file_io.h"
#include "planner/core/limits.h"
#include "planner/core/text_escape.h"
#include "planner/plan/plan_file.h"
#include "planner/plan/plan_outcome.h"
#include "planner/report/plan_report.h"
#include "planner/simulate/step_size_bound.h"
#include "runtime/device_budget.h"
#include "runtime/run_report.h"
#include "runtime/trainer.h"

namespace headroom {
namespace {

Result<TokenFileFormat> DataFormat(const TrainFlags& flags) {
  if (flags.data_format.empty())
    return flags.data.ends_with(".txt") ? TokenFileFormat::kText : TokenFileFormat::kUint16;
  return ParseIn(kTokenFileFormatNames, flags.data_format, "--data-format");
}

std::string ProgressBar(int64_t done, int64_t total) {
  constexpr int kWidth = 20;
  const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
  return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
}

// The trainer's options; `data` receives the token file it reads, if any.
Result<TrainOptions> ToTrainOptions(const TrainFlags& flags, const PlanRequest& request,
                                    std::unique_ptr<TokenSource>& data) {
  TrainOptions options{.seed = static_cast<uint64_t>(flags.seed),
                       .learning_rate = flags.learning_rate};
  options.device = c10::Device(std::string(request.device.TypeName()));
  options.device_spec = request.device;
  if (!flags.memory_limit.empty()) {
    Result<int64_t> bytes = ParseBytes(flags.memory_limit);
    if (!bytes) return MakeError("--memory-limit: " + bytes.error().message);
    options.budget_bytes = *bytes;
  }
  if (!flags.data.empty()) {
    Result<TokenFileFormat> format = DataFormat(flags);
    if (!format) return format.error();
    try {
      data =
          OpenTokenFile(flags.data, *format, request.model.vocab_size, request.config.seq_len + 1);
    } catch (const std::exception& e) {
      return MakeError("--data: " + FirstLine(e.what()));
    }
    options.data = data.get();
  }
  return options;
}

// Pretrained weights and a saved state, when asked for. Files the user named that
// cannot be used are bad input: the error names the flag and the file.
std::optional<Error> LoadStartingPoint(const TrainFlags& flags, Trainer& trainer) {
  const char* flag = "--weights";
  try {
    if (!flags.weights.empty()) {
      const SafetensorsCheckpoint checkpoint(flags.weights);
      const LoadSummary loaded = trainer.LoadWeights(checkpoint);
      std::printf("  loaded %d tensors from %s", loaded.loaded, checkpoint.description().c_str());
      if (!loaded.missing.empty())
        std::printf("; %zu not in it and left as initialized (first: %s)", loaded.missing.size(),
                    loaded.missing.front().c_str());
      std::printf("\n");
    }
    flag = "--resume";
    if (!flags.resume.empty()) {
      trainer.LoadState(flags.resume);
      std::printf("  resumed from %s after step %ld\n", flags.resume.c_str(),
                  static_cast<long>(trainer.steps_done()));
    }
  } catch (const std::exception& e) {
    return Error{std::string(flag) + ": " + FirstLine(e.what())};
  }
  return std::nullopt;
}

void PrintHeader(const PlanRequest& request, const Trainer& trainer, const TokenSource* data) {
  const TrainingConfig& config = trainer.config();
  std::printf("headroom train: %s on %s, micro-batch %ld x %ld, sequence %ld, %s, data: %s\n",
              TerminalEscaped(request.model.name).c_str(),
              std::string(request.device.TypeName()).c_str(), static_cast<long>(config.micro_batch),
              static_cast<long>(config.grad_accum_steps), static_cast<long>(config.seq_len),
              std::string(PrecisionName(config.precision)).c_str(),
              data ? data->description().c_str() : "synthetic");
  std::printf(
      "  predicted peak %s allocated (for headroom's runtime: LibTorch's per-parameter "
      "optimizer, a 1-byte dropout mask where ATen's CPU dropout keeps the activation "
      "dtype; `plan --stack pytorch` predicts a transformers loop)\n",
      FormatBytes(trainer.predicted_peak_allocated_bytes()).c_str());
  std::fflush(stdout);
}

// Trains from the trainer's step to flags.steps, printing progress and saving states.
RunReport RunSteps(const TrainFlags& flags, Trainer& trainer) {
  RunReport report;
  while (trainer.steps_done() < flags.steps) {
    const StepStats s = trainer.Step();
    const double step_tokens = report.Record(s, trainer.config());
    std::printf("  %s step %ld/%ld  loss %.4f  %.0f tokens/s  peak %s%s\n",
                ProgressBar(s.step, flags.steps).c_str(), static_cast<long>(s.step),
                static_cast<long>(flags.steps), s.loss, step_tokens / s.seconds,
                FormatBytes(s.peak_allocated_bytes).c_str(),
                s.skipped ? "  (skipped: overflow)" : "");
    std::fflush(stdout);
    if (flags.save_every > 0 && s.step % flags.save_every == 0) {
      trainer.SaveState(flags.state_path());
      std::printf("  saved the training state to %s\n", flags.state_path().c_str());
    }
  }
  report.Finish(trainer);
  return report;
}

void PrintSummary(const RunReport& report, bool cuda) {
  std::printf("  measured peak %s vs predicted %s (%+.2f%%)\n",
              FormatBytes(report.measured_peak_allocated_bytes).c_str(),
              FormatBytes(report.predicted_peak_allocated_bytes).c_str(), report.error_pct);
  if (cuda)
    std::printf("  reserved: measured %s vs predicted %s\n",
                FormatBytes(report.measured_peak_reserved_bytes).c_str(),
                FormatBytes(report.predicted_peak_reserved_bytes).c_str());
  if (const RoutingSeen& seen = report.routing_seen; seen.calls > 0) {
    // The memory does not depend on it (grouped_mm keeps a row per token-expert pair);
    // printed so that the assumption can be checked against the data.
    std::printf(
        "  routing seen: the most-loaded expert took %.2fx its balanced share (mean over %ld "
        "layer calls %.2fx; worst case %.2fx); assumed %s, which does not change memory\n",
        seen.max_over_balanced, static_cast<long>(seen.calls), seen.mean_over_balanced,
        seen.worst_case_ratio,
        std::string(MoeRoutingName(report.routing_assumed.value_or(MoeRouting::kBalanced)))
            .c_str());
  }
}

void SaveWeights(const TrainFlags& flags, const Trainer& trainer) {
  if (flags.save.empty()) return;
  trainer.SaveWeights(flags.save);
  const bool full = trainer.config().fine_tune.mode == FineTuneMode::kFull;
  std::printf("  saved %s to %s\n", full ? "the weights" : "the LoRA adapter (PEFT)",
              flags.save.c_str());
}

int Train(const TrainFlags& flags, const PlanRequest& request, const Plan& plan,
          const std::optional<RunBudget>& budget = std::nullopt) {
  std::unique_ptr<TokenSource> data;
  Result<TrainOptions> options = ToTrainOptions(flags, request, data);
  if (!options) return ReportUsageError(options.error().message);
  Trainer trainer(request.model, plan, *options);
  trainer.set_replan_listener([](const std::string& what) {
    std::printf("  %s\n", what.c_str());
    std::fflush(stdout);
  });
  if (auto error = LoadStartingPoint(flags, trainer)) return ReportUsageError(error->message);
  PrintHeader(request, trainer, data.get());
  if (trainer.steps_done() >= flags.steps) {
    std::printf("  already at step %ld of %ld: nothing to train\n",
                static_cast<long>(trainer.steps_done()), static_cast<long>(flags.steps));
    return 0;
  }
  RunReport report = RunSteps(flags, trainer);
  report.budget = budget;
  PrintSummary(report, request.device.is_cuda);
  SaveWeights(flags, trainer);
  if (!flags.report.empty())
    WriteRunReport(flags.report, request.model.name, request.device.is_cuda, report);
  return 0;
}

// Why these flags cannot drive `train`, which runs the headroom stack with LibTorch's
// per-parameter optimizers.
std::optional<Error> CheckTrainFlags(const TrainFlags& flags) {
  if (flags.plan_file.empty() && flags.plan.model.empty())
    return Error{"train needs --model (with planner flags) or --plan plan.yaml"};
  if (flags.plan.stack && *flags.plan.stack != Stack::kHeadroom)
    return Error{"train runs the headroom stack; --stack " +
                 std::string(StackName(*flags.plan.stack)) + " is for `headroom plan`"};
  if (flags.plan.optimizer_impl && *flags.plan.optimizer_impl != OptimizerImpl::kForLoop)
    return Error{"train's optimizers loop over parameters; --optimizer-impl " +
                 std::string(OptimizerImplName(*flags.plan.optimizer_impl)) +
                 " is for `headroom plan`"};
  if (flags.plan.gpus_auto || (flags.plan.gpus > 1 && !flags.plan.sharding))
    return Error{"train runs one process; --gpus " +
                 (flags.plan.gpus_auto ? std::string("auto") : std::to_string(flags.plan.gpus)) +
                 " is for `headroom plan` (and its --emit exports)"};
  if (flags.plan.solve_precision && !flags.plan.auto_plan)
    return Error{
        "train runs a stated plan; --precision auto needs --auto (or `headroom plan`: write "
        "the solved plan with -o and run it with --plan)"};
  if (!flags.plan_out.empty() && !flags.plan.auto_plan)
    return Error{"--plan-out is where --auto writes the plan it solves; give --auto"};
  if ((flags.plan.global_batch || flags.plan.margin) && !flags.plan.auto_plan)
    return Error{std::string(flags.plan.global_batch ? "--global-batch" : "--margin") +
                 " applies when --auto solves the plan; give --auto"};
  if (!flags.data_format.empty() && flags.data.empty())
    return Error{"--data-format applies to a --data file; give --data"};
  if (flags.state && flags.save_every == 0)
    return Error{"--state is where --save-every writes; give --save-every N"};
  if (flags.save_every > flags.steps)
    return Error{"--save-every " + std::to_string(flags.save_every) + " is past --steps " +
                 std::to_string(flags.steps) + ": no state would be saved"};
  return std::nullopt;
}

// train's kernels compute the ops headroom's builders emit. An imported graph's ops record
// what each ATen call of the model's own code allocated, saved and freed
// (docs/graph-file.md), not what it computes: train refuses the first one it meets.
std::optional<Error> CheckKernelsCover(const OpGraph& graph, const ModelSpec& model) {
  for (int i = 0; i < graph.num_ops(); ++i) {
    const OpNode& op = graph.op(OpId{i});
    if (op.kind != OpKind::kTraced) continue;
    std::string built;
    for (std::string_view type : BuiltModelTypes())
      built += (built.empty() ? "" : ", ") + std::string(type);
    return Error{"train has no kernel for aten." +
                 TerminalEscaped(op.traced ? op.traced->aten : std::string("?")) + " (module " +
                 TerminalEscaped(ModuleOfTracedName(op.name)) + "), the first op of model_type '" +
                 TerminalEscaped(model.model_type) +
                 "': its graph is imported from its transformers code and records what each op "
                 "allocates, not what it computes. train runs the types headroom builds (" +
                 built + "); plan this one with `headroom plan`"};
  }
  return std::nullopt;
}

// The device the solver plans for: the CPU with the budget's bytes; on CUDA the catalog
// GPU the device's name matches (its time model), holding the free memory the driver
// reported on top of its context, which already exists.
DeviceSpec BudgetDevice(const PlanRequest& request, const DeviceBudget& budget) {
  if (!request.device.is_cuda) return CpuDevice(budget.bytes);
  std::optional<DeviceSpec> gpu = MatchGpu(budget.device_name, budget.total_bytes);
  if (!gpu) {
    std::printf(
        "  note: %s is not in the GPU catalog: planned with its measured memory; the time "
        "estimate is generic\n",
        budget.device_name.c_str());
    gpu = CustomGpu(0);
  }
  gpu->memory_bytes = budget.bytes + gpu->ContextBytes();
  return *gpu;
}

// Writes the solved plan where --plan-out (or the default) says, and says so.
std::optional<Error> WriteSolvedPlan(const TrainFlags& flags, const PlanRequest& request,
                                     const PlanOutcome& outcome) {
  const std::string path = flags.plan_out_path();
  if (auto error = WriteFileAtomically(path, WritePlanYaml(ToPlanFile(request, outcome))))
    return error;
  std::printf("\nplan written to %s\n\n", path.c_str());
  return std::nullopt;
}

// train --auto: the plan solved against the memory this device has, printed and written
// as `plan` does, then trained. When nothing fits it exits before loading any weights.
int RunAutoTrain(const TrainFlags& flags, PlanRequest request, const OpGraph& graph) {
  std::optional<int64_t> limit;
  if (!flags.memory_limit.empty()) {
    Result<int64_t> bytes = ParseBytes(flags.memory_limit);
    if (!bytes) return ReportUsageError("--memory-limit: " + bytes.error().message);
    limit = *bytes;
  }
  DeviceBudget budget;
  try {
    budget = ReadDeviceBudget(request.device.is_cuda, limit);
  } catch (const std::exception& e) {
    return ReportRunFailure("cannot read the device's memory: " + FirstLine(e.what()));
  }
  request.device = BudgetDevice(request, budget);
  PlanFlags solver = flags.plan;
  solver.solve_precision = solver.solve_precision || !solver.precision;  // free unless stated
  Result<std::optional<SearchOptions>> options = ToSearchOptions(solver, request);
  if (!options) return ReportUsageError(options.error().message);
  Result<PlanOutcome> outcome = PlanFor(request, graph, *options);
  if (!outcome) return ReportUsageError(outcome.error().message);
  std::printf("budget: %s (%s)\n", FormatBytes(budget.bytes).c_str(), budget.source.c_str());
  std::fputs(FormatPlanText(request, *outcome).c_str(), stdout);
  if (!outcome->fits())
    return ReportUsageError("no plan fits in " + FormatBytes(budget.bytes) + " (" + budget.source +
                            "); nothing was trained");
  if (auto error = WriteSolvedPlan(flags, request, *outcome))
    return ReportRunFailure(error->message);
  std::fflush(stdout);
  return Train(flags, request, outcome->plan,
               RunBudget{budget.bytes, budget.source, budget.device_name});
}
}  // namespace

std::string TrainFlags::plan_out_path() const {
  if (!plan_out.empty()) return plan_out;
  const std::filesystem::path beside = std::filesystem::path(report).parent_path();
  return (beside / "plan.yaml").string();
}

void AddTrainFlags(CLI::App& command, TrainFlags& flags) {
  AddRequestFlags(command, flags.plan);
  AddSolverChoiceFlags(command, flags.plan,
                       "Solve the plan against the memory this device has free (or "
                       "--memory-limit), print and write it (--plan-out), then train with it");
  // A plan file states the whole request: with --plan, every request flag is an error.
  std::vector<CLI::Option*> request_flags =
      command.get_options([](const CLI::Option* o) { return o->get_name() != "--help"; });
  CLI::Option* plan = command.add_option(
      "--plan", flags.plan_file,
      "Execute a plan file written by `headroom plan -o` (instead of planner flags)");
  for (CLI::Option* o : request_flags) plan->excludes(o);
  command.get_option("--model")->required(false);
  AddIntegerOption(command, "--steps", flags.steps, 1, limits::kMaxSteps,
                   "Optimizer steps to train, in all when resuming (default 10)");
  AddIntegerOption(command, "--seed", flags.seed, 0, std::numeric_limits<int64_t>::max(),
                   "Seed of the weights, data and dropout (default 0)");
  AddRealOption(command, "--lr", flags.learning_rate, 1e-12, 10.0,
                "Learning rate, in [1e-12, 10] (default 0.001)");
  command.add_option("--weights", flags.weights,
                     "Pretrained Hugging Face weights: a .safetensors file, a sharded "
                     "model.safetensors.index.json, or a directory holding either");
  command.add_option("--data", flags.data,
                     "Training tokens: a binary token file (.bin) or plain text (.txt, one byte "
                     "per token); default: a synthetic learnable task");
  command.add_option("--data-format", flags.data_format,
                     ChoiceList(NamesIn(kTokenFileFormatNames), " | ", " | ") +
                         " (default: text for .txt, else u16)");
  command.add_option("--memory-limit", flags.memory_limit,
                     "Fail allocations past this (e.g. 3MiB) as a full device would; an OOM "
                     "makes train re-plan");
  command.add_option("--save", flags.save,
                     "Directory for the trained weights (model.safetensors) or, with LoRA, the "
                     "PEFT adapter (adapter_model.safetensors + adapter_config.json)");
  AddIntegerOption(command, "--save-every", flags.save_every, 1, limits::kMaxSteps,
                   "Write a resumable training state every N steps");
  command.add_option("--state", flags.state,
                     std::string("Where --save-every writes the training state (default ") +
                         TrainFlags::kDefaultStatePath + ")");
  command.add_option("--resume", flags.resume, "Continue the run saved in this training state");
  command.add_option("--report", flags.report, "Write the run report as JSON to this file");
  command.add_option("--plan-out", flags.plan_out,
                     "Where --auto writes the plan it solved (default: plan.yaml beside the "
                     "--report, or here)");
}

int RunTrainCommand(const TrainFlags& flags) {
  if (auto error = CheckTrainFlags(flags)) return ReportUsageError(error->message);
  // --auto solves for what the trainer runs: the headroom stack.
  PlanFlags request_flags = flags.plan;
  if (request_flags.auto_plan) request_flags.stack = Stack::kHeadroom;
  Result<PlanRequest> request =
      flags.plan_file.empty() ? ToPlanRequest(request_flags) : ReadPlanRequest(flags.plan_file);
  if (!request) return ReportUsageError(request.error().message);
  if (auto error = CheckExecutable(request->config)) return ReportUsageError(error->message);
  if (std::optional<Error> invalid = ValidateRequest(*request))
    return ReportUsageError(invalid->message);
  // The checkpoint set is resolved against the graph's blocks, as `plan` resolves it.
  Result<OpGraph> graph = BuildGraph(request->model, GraphOptionsOf(request->config));
  if (!graph) return ReportUsageError(graph.error().message);
  if (auto error = CheckKernelsCover(*graph, request->model))
    return ReportUsageError(error->message);
  Result<Plan> plan = Plan::FromConfig(request->config, static_cast<int>(graph->blocks().size()));
  if (!plan) return ReportUsageError(plan.error().message);
  if (auto error = CheckOutputFlags(
          {{"--report", flags.report.empty() ? std::nullopt : std::optional(flags.report)},
           {"--state", flags.save_every > 0 ? std::optional(flags.state_path()) : std::nullopt},
           {"--plan-out",
            flags.plan.auto_plan ? std::optional(flags.plan_out_path()) : std::nullopt}}))
    return ReportUsageError(error->message);
  if (!flags.plan.auto_plan) {
    if (auto error = CheckStepSize(*graph, {request->config.micro_batch, request->config.seq_len}))
      return ReportUsageError(error->message);
  }
  try {
    if (flags.plan.auto_plan) return RunAutoTrain(flags, *request, *graph);
    return Train(flags, *request, *plan);
  } catch (const std::exception& e) {
    return ReportRunFailure("train failed: " + FirstLine(e.what()));
  }
}

}  // namespace headroom
