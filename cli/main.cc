// headroom: predict and plan the memory of LLM fine-tuning. This file only parses the
// command line and prints; the work lives in headroom::planner and headroom::models.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <new>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/capacity_command.h"
#include "cli/import_command.h"
#include "cli/plan_command.h"
#include "cli/plan_flags.h"
#if HEADROOM_WITH_TORCH
#include "cli/train_command.h"
#endif
#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/core/byte_units.h"
#include "planner/core/checked_math.h"
#include "planner/core/gpu_catalog.h"
#include "planner/core/heap_reuse.h"

namespace headroom {
namespace {

int Fail(const Error& e) { return ReportUsageError(e.message); }

int RunModels() {
  fmt::print("{:<16} {:<9} {:>16}  {}\n", "model", "family", "parameters", "description");
  for (const std::string& name : CatalogModelNames()) {
    auto spec = LoadCatalogModel(name);
    if (!spec) return Fail(spec.error());
    auto graph = BuildGraph(*spec, {});
    if (!graph) return Fail(graph.error());
    fmt::print("{:<16} {:<9} {:>16}  {}\n", name, FamilyName(spec->family), graph->ParameterCount(),
               CatalogDescription(name));
  }
  return 0;
}

int RunGpus() {
  fmt::print("{:<11} {:>10} {:>9} {:>9} {:>9} {:>6}  {}\n", "gpu", "memory", "bf16 TF", "fp32 TF",
             "GB/s", "bf16", "description");
  for (const DeviceSpec& d : GpuCatalog()) {
    const double bf16 = d.peak_tflops.count("bf16") ? d.peak_tflops.at("bf16") : 0.0;
    fmt::print("{:<11} {:>10} {:>9} {:>9} {:>9} {:>6}  {}\n", d.name, FormatBytes(d.memory_bytes),
               bf16, d.peak_tflops.at("fp32"), d.bandwidth_gbps, d.supports_bf16() ? "yes" : "no",
               d.description);
  }
  fmt::print("\nAlso: --gpu-mem SIZE for a custom budget, --device cpu for the host.\n");
  return 0;
}

// Parses the command line; an exit code when it is not a command to run (help, version,
// bad input).
std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  const std::vector<CLI::App*> commands = app.get_subcommands([](CLI::App*) { return true; });
  const auto named = [&](const CLI::App* c) { return argc > 1 && c->get_name() == argv[1]; };
  if (argc > 1 && argv[1][0] != '-' && std::none_of(commands.begin(), commands.end(), named))
    return ReportUsageError(fmt::format(
        "unknown command '{}'; use plan, simulate, train, capacity, import, models or gpus "
        "(see `headroom --help`)",
        argv[1]));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return ReportUsageError(fmt::format("{} (see `headroom --help`)", e.what()));
  }
  return std::nullopt;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "headroom: will this fine-tuning run fit on that GPU? Predicts peak memory per category and "
      "phase."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "headroom 0.1.0");

  PlanFlags plan_flags;
  auto* plan =
      app.add_subcommand("plan", "Predict the peak memory of a training step and whether it fits");
  AddPlanFlags(*plan, plan_flags);

  PlanFlags sim_flags;
  std::string csv_path = "timeline.csv", svg_path = "timeline.svg";
  auto* simulate = app.add_subcommand(
      "simulate", "Like plan, and write the memory timeline as CSV and an SVG chart");
  AddPlanFlags(*simulate, sim_flags);
  simulate->add_option("--csv", csv_path, "Where to write the timeline CSV")->capture_default_str();
  simulate->add_option("--svg", svg_path, "Where to write the SVG chart")->capture_default_str();

#if HEADROOM_WITH_TORCH
  TrainFlags train_flags;
  auto* train = app.add_subcommand(
      "train", "Plan, then train on this machine with that plan; measured vs predicted memory");
  AddTrainFlags(*train, train_flags);
#endif

  CapacityFlags capacity_flags;
  auto* capacity = app.add_subcommand(
      "capacity", "Compare GPU types and counts for a training job: plan, time and cost of each");
  AddCapacityFlags(*capacity, capacity_flags);

  ImportFlags import_flags;
  auto* import = app.add_subcommand(
      "import",
      "Record a model's graph from its own transformers code (python3 with torch, transformers "
      "and peft) for one training regime and write the graph file --model plans");
  AddImportFlags(*import, import_flags);

  auto* models = app.add_subcommand("models", "List the built-in model catalog");
  auto* gpus = app.add_subcommand("gpus", "List the GPU catalog");

  if (auto exit_code = Parse(app, argc, argv)) return *exit_code;
  if (models->parsed()) return RunModels();
  if (gpus->parsed()) return RunGpus();
#if HEADROOM_WITH_TORCH
  // Training's host memory is its tensors': the planner's heap setting is not for it.
  if (train->parsed()) return RunTrainCommand(train_flags);
#endif
  KeepFreedHeapForReuse();
  if (capacity->parsed()) return RunCapacityCommand(capacity_flags);
  if (import->parsed()) return RunImportCommand(import_flags);
  if (simulate->parsed()) {
    const TimelineOutputs outputs{csv_path, svg_path};
    return RunPlanCommand(sim_flags, &outputs);
  }
  return RunPlanCommand(plan_flags, nullptr);
}

}  // namespace
}  // namespace headroom

// One error style: bad input exits 2, a failed run 1, each with one line; no exception
// escapes.
int main(int argc, char** argv) {
  using namespace headroom;
  // Past a file-size limit (RLIMIT_FSIZE) a write then fails with EFBIG and the
  // temporary is removed, where SIGXFSZ's default would kill the process and leave it.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return Main(argc, argv);
  } catch (const SizeOverflow& e) {
    return ReportUsageError(e.what());
  } catch (const std::bad_alloc&) {
    return ReportRunFailure("out of host memory");
  } catch (const std::exception& e) {
    return ReportRunFailure(
        fmt::format("internal error, please report it with the command you "
                    "ran: {}",
                    FirstLine(e.what())));
  }
}
