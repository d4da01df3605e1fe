// (No fmt here: LibTorch's include directory carries its own, newer copy.)
#include "cli/train_command.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "planner/byte_units.h"
#include "runtime/trainer.h"

namespace headroom {

void AddTrainFlags(CLI::App& command, TrainFlags& flags) {
  AddPlanFlags(command, flags.plan);
  command.add_option("--steps", flags.steps, "Optimizer steps to train")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--seed", flags.seed, "Seed of the weights, data and dropout")
      ->capture_default_str();
  command.add_option("--lr", flags.learning_rate, "Learning rate")->capture_default_str();
  command.add_option("--report", flags.report, "Write the run report as JSON to this file");
}

int RunTrainCommand(const TrainFlags& flags) {
  Result<PlanRequest> request = ToPlanRequest(flags.plan);
  if (!request) return ReportUsageError(request.error().message);
  if (request->device.is_cuda) {
    return ReportUsageError(
        "train runs on the CPU in this build (--device cpu); the CUDA path is not implemented yet");
  }
  TrainingConfig config = request->config;
  if (auto error = CheckExecutable(config)) return ReportUsageError(error->message);
  if (std::optional<Error> invalid = ValidateRequest(*request))
    return ReportUsageError(invalid->message);
  Result<std::vector<bool>> flags_per_block =
      config.checkpoint.Resolve(static_cast<int>(request->model.num_layers));
  if (!flags_per_block) return ReportUsageError(flags_per_block.error().message);

  Trainer trainer(request->model, config, *flags_per_block,
                  {.seed = flags.seed, .learning_rate = flags.learning_rate});
  const double tokens_per_step = static_cast<double>(config.micro_batch * config.grad_accum_steps *
                                                     config.seq_len);
  std::printf("headroom train: %s on cpu, micro-batch %ld x %ld, sequence %ld, %s\n",
              request->model.name.c_str(), static_cast<long>(config.micro_batch),
              static_cast<long>(config.grad_accum_steps), static_cast<long>(config.seq_len),
              std::string(PrecisionName(config.precision)).c_str());
  std::printf("  predicted peak %s\n",
              FormatBytes(trainer.predicted_peak_allocated_bytes()).c_str());
  RunReport report;
  report.predicted_peak_allocated_bytes = trainer.predicted_peak_allocated_bytes();
  double seconds = 0;
  for (int64_t i = 0; i < flags.steps; ++i) {
    const StepStats s = trainer.Step();
    seconds += s.seconds;
    if (i == 0) report.loss_first = s.loss;
    report.loss_last = s.loss;
    report.skipped_steps += s.skipped ? 1 : 0;
    std::printf("  step %ld/%ld  loss %.4f  %.0f tokens/s  peak %s%s\n", static_cast<long>(s.step),
                static_cast<long>(flags.steps), s.loss, tokens_per_step / s.seconds,
                FormatBytes(s.peak_allocated_bytes).c_str(), s.skipped ? "  (skipped: overflow)" : "");
    std::fflush(stdout);
  }
  report.steps = flags.steps;
  report.measured_peak_allocated_bytes = trainer.measured_peak_allocated_bytes();
  report.error_pct = 100.0 *
                     static_cast<double>(report.measured_peak_allocated_bytes -
                                         report.predicted_peak_allocated_bytes) /
                     static_cast<double>(report.predicted_peak_allocated_bytes);
  report.tokens_per_second = tokens_per_step * static_cast<double>(flags.steps) / seconds;
  std::printf("  measured peak %s vs predicted %s (%+.2f%%)\n",
              FormatBytes(report.measured_peak_allocated_bytes).c_str(),
              FormatBytes(report.predicted_peak_allocated_bytes).c_str(), report.error_pct);
  if (!flags.report.empty()) {
    const nlohmann::json j = {
        {"model", request->model.name},
        {"device", "cpu"},
        {"predicted", {{"peak_allocated_bytes", report.predicted_peak_allocated_bytes}}},
        {"measured", {{"peak_allocated_bytes", report.measured_peak_allocated_bytes}}},
        {"error_pct", report.error_pct},
        {"steps", report.steps},
        {"loss_first", report.loss_first},
        {"loss_last", report.loss_last},
        {"tokens_per_second", report.tokens_per_second},
        {"skipped_steps", report.skipped_steps},
        {"oom_retries", report.oom_retries},
    };
    std::ofstream(flags.report) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace headroom
