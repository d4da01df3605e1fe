#include "cli/capacity_command.h"

#include <unistd.h>

#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "cli/numeric_option.h"
#include "planner/core/file_io.h"
#include "planner/core/gpu_catalog.h"
#include "planner/core/text_escape.h"
#include "planner/report/capacity_html.h"
#include "planner/report/capacity_report.h"

namespace headroom {
namespace {

constexpr int64_t kDefaultMaxGpus = 64;
constexpr double kMaxTokens = 1e18;

// Flags of plan that name one device or one count: capacity sweeps those itself.
std::optional<Error> CheckSweptFlags(const CapacityFlags& f) {
  const PlanFlags& p = f.request;
  const char* flag = p.gpu                        ? "--gpu"
                     : p.gpu_mem                  ? "--gpu-mem"
                     : p.device                   ? "--device"
                     : p.gpus_auto || p.gpus != 1 ? "--gpus"
                     : p.nodes                    ? "--nodes"
                     : p.rank                     ? "--rank"
                                                  : nullptr;
  if (flag)
    return Error{
        fmt::format("{} does not apply to capacity, which sweeps GPU types and counts; "
                    "choose them with --gpu-types and --max-gpus",
                    flag)};
  if (f.tokens.has_value() == f.dataset_tokens.has_value())
    return Error{"say how long the job is: --tokens T, or --dataset-tokens D (with --epochs E)"};
  if (f.tokens && f.epochs != 1)
    return Error{"--epochs multiplies --dataset-tokens; with --tokens give the total"};
  return std::nullopt;
}

Result<PriceCatalog> LoadPrices(const CapacityFlags& f) {
  if (!f.prices_path) return BuiltInPrices();
  auto text = ReadRegularFile(*f.prices_path);
  if (!text) return MakeError("--prices: " + text.error().message);
  return ParsePriceCatalog(*text, *f.prices_path);
}

// Each GPU type as plan would take it with --gpu NAME --gpus auto. A type the request
// cannot run on (bf16 on a V100) is left out with a note unless it was named.
Result<std::vector<CapacityGpu>> GpusToSweep(const CapacityFlags& f,
                                             std::vector<std::string>& notes) {
  const std::vector<std::string> names = f.gpu_types.empty() ? GpuNames() : f.gpu_types;
  for (const std::string& name : names)  // every name checked before any is solved
    if (auto gpu = FindGpu(name); !gpu) return MakeError("--gpu-types: " + gpu.error().message);
  std::vector<CapacityGpu> gpus;
  for (const std::string& name : names) {
    PlanFlags flags = f.request;
    flags.gpu = name;
    flags.gpus_auto = true;
    auto request = ToPlanRequest(flags);
    if (!request) return request.error();
    if (auto error = ValidateRequest(*request)) {
      if (!f.gpu_types.empty()) return MakeError(fmt::format("{}: {}", name, error->message));
      notes.push_back(fmt::format("{} left out: {}", name, error->message));
      continue;
    }
    auto options = ToSearchOptions(flags, *request);
    if (!options) return options.error();
    gpus.push_back({*request, **options});
  }
  if (gpus.empty())
    return MakeError("no GPU type can run this request; the first: " + notes.front());
  return gpus;
}

CapacitySubject SubjectOf(const CapacityFlags& f, const CapacityGpu& first) {
  const TrainingConfig& c = first.request.config;
  std::string tuning = "full fine-tuning";
  if (c.fine_tune.mode != FineTuneMode::kFull)
    tuning = fmt::format("{} r{}", c.fine_tune.mode == FineTuneMode::kQLora ? "QLoRA" : "LoRA",
                         c.fine_tune.lora_rank);
  const std::string precision = f.request.solve_precision ? "precision chosen per GPU"
                                : f.request.precision
                                    ? std::string(PrecisionName(*f.request.precision))
                                    : "amp-bf16 (amp-fp16 where bf16 is missing)";
  // The long-sequence techniques the request names (issue 41), as the plan report says them.
  std::string techniques;
  if (c.loss.chunked()) techniques += ", loss " + c.loss.ToString();
  if (c.packing == Packing::kPaddingFree) techniques += ", padding-free rows";
  if (c.activation_offload) techniques += ", activation offload";
  CapacitySubject s{
      first.request.model.name,
      fmt::format("{}, {}, {}, seq {}, global batch {}{}", tuning, OptimizerName(c.optimizer),
                  precision, c.seq_len, first.options.global_batch, techniques),
      ""};
  if (first.request.model.is_moe()) s.moe_routing = f.request.moe_routing.value_or("balanced");
  return s;
}

// A bar on a terminal's stderr once the sweep has run a second, so short runs and
// redirected output print nothing.
CapacityProgress ProgressBar() {
  const auto start = std::chrono::steady_clock::now();
  const bool terminal = isatty(STDERR_FILENO) != 0;
  return [start, terminal](size_t done, size_t total) {
    if (!terminal || std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) return;
    const size_t filled = 30 * done / total;
    fmt::print(stderr, "\rcapacity: [{:<30}] {}/{} GPU types{}", std::string(filled, '#'), done,
               total, done == total ? "\n" : "");
  };
}

int WriteOutputs(const CapacityFlags& f, const CapacitySubject& subject,
                 const CapacityReport& report, const PriceCatalog& prices) {
  if (f.request.json) {
    std::cout << JsonText(CapacityJson(subject, report, prices)) << "\n";
  } else {
    PrintReport(FormatCapacityText(subject, report, prices));
  }
  if (f.csv_path)
    if (auto error = WriteFileAtomically(*f.csv_path, CapacityCsv(report)))
      return ReportRunFailure(error->message);
  if (f.html_path)
    if (auto error = WriteFileAtomically(*f.html_path, CapacityHtml(subject, report, prices)))
      return ReportRunFailure(error->message);
  return 0;
}

}  // namespace

void AddCapacityFlags(CLI::App& cmd, CapacityFlags& f) {
  f.request.max_gpus = kDefaultMaxGpus;
  AddRequestFlags(cmd, f.request);
  AddSolverChoiceFlags(cmd, f.request, "");
  cmd.remove_option(cmd.get_option("--auto"));  // capacity always solves
  cmd.get_option("--max-gpus")
      ->description(
          fmt::format("The most GPUs of a type to consider (default {})", kDefaultMaxGpus));
  AddRealOption(cmd, "--tokens", f.tokens, 1.0, kMaxTokens,
                "Tokens the job trains on in all, e.g. 1e9");
  AddRealOption(cmd, "--dataset-tokens", f.dataset_tokens, 1.0, kMaxTokens,
                "Tokens in the dataset (with --epochs, instead of --tokens)");
  AddRealOption(cmd, "--epochs", f.epochs, 0.001, 1e6, "Passes over --dataset-tokens (default 1)");
  cmd.add_option("--gpu-types", f.gpu_types,
                 "GPU types to compare, e.g. h100-80gb,a100-80gb (default: the whole catalog)")
      ->delimiter(',');
  cmd.add_option("--prices", f.prices_path,
                 "Price file (the format of planner/core/catalog/prices.yaml; default: the "
                 "built-in one)");
  cmd.add_flag("--owned", f.owned,
               "Price owned GPUs: purchase price over the file's lifetime and utilization, "
               "instead of cloud rental");
  AddRealOption(cmd, "--max-hours", f.max_hours, 0.0, 1e9,
                "Leave out configurations slower than this");
  AddRealOption(cmd, "--max-cost", f.max_cost, 0.0, 1e15,
                "Leave out configurations costing more (US$)");
  cmd.add_flag("--json", f.request.json, "Print JSON instead of the table");
  cmd.add_option("--csv", f.csv_path, "Also write the configurations as CSV");
  cmd.add_option("--html", f.html_path, "Also write a self-contained HTML report");
}

int RunCapacityCommand(CapacityFlags f) {
  if (auto error = CheckSweptFlags(f)) return ReportUsageError(error->message);
  if (auto error = CheckOutputFlags({{"--csv", f.csv_path}, {"--html", f.html_path}}))
    return ReportUsageError(error->message);
  auto prices = LoadPrices(f);
  if (!prices) return ReportUsageError(prices.error().message);
  std::vector<std::string> notes;
  auto gpus = GpusToSweep(f, notes);
  if (!gpus) return ReportUsageError(gpus.error().message);
  const CapacityJob job{.tokens = f.tokens.value_or(f.dataset_tokens.value_or(0) * f.epochs),
                        .basis = f.owned ? PriceBasis::kOwned : PriceBasis::kCloud,
                        .max_hours = f.max_hours,
                        .max_cost_usd = f.max_cost};
  auto report = SweepCapacity(*gpus, job, *prices, ProgressBar());
  if (!report) return ReportUsageError(report.error().message);
  report->notes.insert(report->notes.begin(), notes.begin(), notes.end());
  return WriteOutputs(f, SubjectOf(f, gpus->front()), *report, *prices);
}

}  // namespace headroom
