// (No fmt here: LibTorch's include directory carries its own, newer copy.)
#include "cli/train_command.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "planner/plan/plan_file.h"
#include "planner/core/byte_units.h"
#include "runtime/trainer.h"

namespace headroom {
namespace {

// The request a saved plan describes: its model, config and device.
Result<PlanRequest> RequestFromPlanFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return MakeError("cannot read the plan file " + path);
  std::stringstream text;
  text << in.rdbuf();
  Result<PlanFile> plan = ParsePlanYaml(text.str(), path);
  if (!plan) return plan.error();
  PlanRequest r{.model = plan->model, .config = plan->config, .device = {}};
  if (plan->device == "cpu") {
    r.device = CpuDevice(plan->device_memory_bytes);
  } else if (Result<DeviceSpec> gpu = FindGpu(plan->device)) {
    r.device = *gpu;
  } else {
    r.device = CustomGpu(plan->device_memory_bytes);
  }
  return r;
}

Result<TokenFileFormat> DataFormat(const TrainFlags& flags) {
  std::string format = flags.data_format;
  if (format.empty()) format = flags.data.ends_with(".txt") ? "text" : "u16";
  if (format == "u16") return TokenFileFormat::kUint16;
  if (format == "u32") return TokenFileFormat::kUint32;
  if (format == "text") return TokenFileFormat::kText;
  return MakeError("--data-format must be u16, u32 or text, not '" + format + "'");
}

std::string ProgressBar(int64_t done, int64_t total) {
  constexpr int kWidth = 20;
  const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
  return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
}

void WriteReport(const std::string& path, const std::string& model, bool cuda, const RunReport& r) {
  nlohmann::json predicted = {{"peak_allocated_bytes", r.predicted_peak_allocated_bytes}};
  nlohmann::json measured = {{"peak_allocated_bytes", r.measured_peak_allocated_bytes}};
  if (cuda) {
    predicted["peak_reserved_bytes"] = r.predicted_peak_reserved_bytes;
    measured["peak_reserved_bytes"] = r.measured_peak_reserved_bytes;
  }
  const nlohmann::json j = {
      {"model", model},
      {"device", cuda ? "cuda" : "cpu"},
      {"stack", "headroom"},  // what `train` runs and predicts for
      {"predicted", predicted},
      {"measured", measured},
      {"error_pct", r.error_pct},
      {"steps", r.steps},
      {"loss_first", r.loss_first},
      {"loss_last", r.loss_last},
      {"tokens_per_second", r.tokens_per_second},
      {"skipped_steps", r.skipped_steps},
      {"oom_retries", r.oom_retries},
  };
  std::ofstream(path) << j.dump(2) << "\n";
}

int Train(const TrainFlags& flags, const PlanRequest& request, const std::vector<bool>& blocks) {
  const TrainingConfig& config = request.config;
  const bool cuda = request.device.is_cuda;
  TrainOptions options{.seed = flags.seed, .learning_rate = flags.learning_rate};
  options.device = cuda ? c10::Device(c10::DeviceType::CUDA, 0) : c10::Device(c10::DeviceType::CPU);
  options.device_spec = request.device;
  if (!flags.memory_limit.empty()) {
    Result<int64_t> bytes = ParseBytes(flags.memory_limit);
    if (!bytes) return ReportUsageError("--memory-limit: " + bytes.error().message);
    options.budget_bytes = *bytes;
  }
  std::unique_ptr<TokenSource> data;
  if (!flags.data.empty()) {
    Result<TokenFileFormat> format = DataFormat(flags);
    if (!format) return ReportUsageError(format.error().message);
    data = OpenTokenFile(flags.data, *format, request.model.vocab_size, config.seq_len + 1);
    options.data = data.get();
  }
  Trainer trainer(request.model, config, blocks, options);
  trainer.set_replan_listener([](const std::string& what) {
    std::printf("  %s\n", what.c_str());
    std::fflush(stdout);
  });
  if (!flags.weights.empty()) {
    const SafetensorsCheckpoint checkpoint(flags.weights);
    const LoadSummary loaded = trainer.LoadWeights(checkpoint);
    std::printf("  loaded %d tensors from %s", loaded.loaded, checkpoint.description().c_str());
    if (!loaded.missing.empty())
      std::printf("; %zu not in it and left as initialized (first: %s)", loaded.missing.size(),
                  loaded.missing.front().c_str());
    std::printf("\n");
  }
  if (!flags.resume.empty()) {
    trainer.LoadState(flags.resume);
    std::printf("  resumed from %s after step %ld\n", flags.resume.c_str(),
                static_cast<long>(trainer.steps_done()));
  }
  std::printf("headroom train: %s on %s, micro-batch %ld x %ld, sequence %ld, %s, data: %s\n",
              request.model.name.c_str(), cuda ? "cuda" : "cpu",
              static_cast<long>(config.micro_batch), static_cast<long>(config.grad_accum_steps),
              static_cast<long>(config.seq_len),
              std::string(PrecisionName(config.precision)).c_str(),
              data ? data->description().c_str() : "synthetic");
  std::printf(
      "  predicted peak %s allocated (for headroom's runtime: LibTorch's per-parameter "
      "optimizer, a 1-byte dropout mask where ATen's CPU dropout keeps the activation "
      "dtype; `plan --stack pytorch` predicts a transformers loop)\n",
      FormatBytes(trainer.predicted_peak_allocated_bytes()).c_str());
  std::fflush(stdout);

  RunReport report;
  double seconds = 0, tokens = 0;
  const int64_t first = trainer.steps_done();
  if (first >= flags.steps) {
    std::printf("  already at step %ld of %ld: nothing to train\n", static_cast<long>(first),
                static_cast<long>(flags.steps));
    return 0;
  }
  for (int64_t step = first; step < flags.steps; ++step) {
    const StepStats s = trainer.Step();
    const TrainingConfig& now = trainer.config();
    const double step_tokens =
        static_cast<double>(now.micro_batch * now.grad_accum_steps * now.seq_len);
    seconds += s.seconds;
    tokens += step_tokens;
    if (step == first) report.loss_first = s.loss;
    report.loss_last = s.loss;
    report.skipped_steps += s.skipped ? 1 : 0;
    report.oom_retries += s.oom_retries;
    std::printf("  %s step %ld/%ld  loss %.4f  %.0f tokens/s  peak %s%s\n",
                ProgressBar(s.step, flags.steps).c_str(), static_cast<long>(s.step),
                static_cast<long>(flags.steps), s.loss, step_tokens / s.seconds,
                FormatBytes(s.peak_allocated_bytes).c_str(),
                s.skipped ? "  (skipped: overflow)" : "");
    std::fflush(stdout);
    if (flags.save_every > 0 && s.step % flags.save_every == 0) {
      trainer.SaveState(flags.state);
      std::printf("  saved the training state to %s\n", flags.state.c_str());
    }
  }
  report.steps = trainer.steps_done() - first;
  report.predicted_peak_allocated_bytes = trainer.predicted_peak_allocated_bytes();
  report.predicted_peak_reserved_bytes = trainer.predicted_peak_reserved_bytes();
  report.measured_peak_allocated_bytes = trainer.measured_peak_allocated_bytes();
  report.measured_peak_reserved_bytes = trainer.measured_peak_reserved_bytes();
  report.error_pct = 100.0 *
                     static_cast<double>(report.measured_peak_allocated_bytes -
                                         report.predicted_peak_allocated_bytes) /
                     static_cast<double>(report.predicted_peak_allocated_bytes);
  report.tokens_per_second = seconds > 0 ? tokens / seconds : 0;
  std::printf("  measured peak %s vs predicted %s (%+.2f%%)\n",
              FormatBytes(report.measured_peak_allocated_bytes).c_str(),
              FormatBytes(report.predicted_peak_allocated_bytes).c_str(), report.error_pct);
  if (cuda)
    std::printf("  reserved: measured %s vs predicted %s\n",
                FormatBytes(report.measured_peak_reserved_bytes).c_str(),
                FormatBytes(report.predicted_peak_reserved_bytes).c_str());
  if (!flags.save.empty()) {
    trainer.SaveWeights(flags.save);
    std::printf(
        "  saved %s to %s\n",
        config.fine_tune.mode == FineTuneMode::kFull ? "the weights" : "the LoRA adapter (PEFT)",
        flags.save.c_str());
  }
  if (!flags.report.empty()) WriteReport(flags.report, request.model.name, cuda, report);
  return 0;
}

}  // namespace

void AddTrainFlags(CLI::App& command, TrainFlags& flags) {
  AddPlanFlags(command, flags.plan);
  // A plan file carries the model: --model is needed only without one.
  CLI::Option* model = command.get_option("--model")->required(false);
  command
      .add_option("--plan", flags.plan_file,
                  "Execute a plan file written by `headroom plan -o` (instead of planner flags)")
      ->excludes(model);
  command.add_option("--steps", flags.steps, "Optimizer steps to train (in all, when resuming)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--seed", flags.seed, "Seed of the weights, data and dropout")
      ->capture_default_str();
  command.add_option("--lr", flags.learning_rate, "Learning rate")->capture_default_str();
  command.add_option("--weights", flags.weights,
                     "Pretrained Hugging Face weights: a .safetensors file, a sharded "
                     "model.safetensors.index.json, or a directory holding either");
  command.add_option("--data", flags.data,
                     "Training tokens: a binary token file (.bin) or plain text (.txt, one byte "
                     "per token); default: a synthetic learnable task");
  command.add_option("--data-format", flags.data_format,
                     "u16 | u32 | text (default: text for .txt, else u16)");
  command.add_option("--memory-limit", flags.memory_limit,
                     "Fail allocations past this (e.g. 3MiB) as a full device would; an OOM "
                     "makes train re-plan");
  command.add_option("--save", flags.save,
                     "Directory for the trained weights (model.safetensors) or, with LoRA, the "
                     "PEFT adapter (adapter_model.safetensors + adapter_config.json)");
  command
      .add_option("--save-every", flags.save_every,
                  "Write a resumable training state every N steps")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--state", flags.state, "Where --save-every writes the training state")
      ->capture_default_str();
  command.add_option("--resume", flags.resume, "Continue the run saved in this training state");
  command.add_option("--report", flags.report, "Write the run report as JSON to this file");
}

int RunTrainCommand(const TrainFlags& flags) {
  if (flags.plan_file.empty() && flags.plan.model.empty())
    return ReportUsageError("train needs --model (with planner flags) or --plan plan.yaml");
  // train runs headroom's own runtime: LibTorch's per-parameter optimizers.
  if (!flags.plan.stack.empty() && flags.plan.stack != "headroom")
    return ReportUsageError("train runs the headroom stack; --stack " + flags.plan.stack +
                            " is for `headroom plan`");
  if (!flags.plan.optimizer_impl.empty() && flags.plan.optimizer_impl != "for-loop")
    return ReportUsageError("train's optimizers loop over parameters; --optimizer-impl " +
                            flags.plan.optimizer_impl + " is for `headroom plan`");
  Result<PlanRequest> request =
      flags.plan_file.empty() ? ToPlanRequest(flags.plan) : RequestFromPlanFile(flags.plan_file);
  if (!request) return ReportUsageError(request.error().message);
  if (auto error = CheckExecutable(request->config)) return ReportUsageError(error->message);
  if (std::optional<Error> invalid = ValidateRequest(*request))
    return ReportUsageError(invalid->message);
  Result<std::vector<bool>> blocks =
      request->config.checkpoint.Resolve(static_cast<int>(request->model.num_layers));
  if (!blocks) return ReportUsageError(blocks.error().message);
  try {
    return Train(flags, *request, *blocks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headroom train: %s\n", e.what());
    return 1;
  }
}

}  // namespace headroom
