#include "runtime/run_report.h"

#include <nlohmann/json.hpp>

#include "planner/core/file_io.h"
#include "planner/core/text_escape.h"
#include "runtime/errors.h"

namespace headroom {

double RunReport::Record(const StepStats& s, const TrainingConfig& config) {
  if (steps == 0) loss_first = s.loss;
  loss_last = s.loss;
  ++steps;
  skipped_steps += s.skipped ? 1 : 0;
  oom_retries += s.oom_retries;
  seconds += s.seconds;
  const double step_tokens =
      static_cast<double>(config.micro_batch * config.grad_accum_steps * config.seq_len);
  tokens += step_tokens;
  tokens_per_second = seconds > 0 ? tokens / seconds : 0;
  return step_tokens;
}

void RunReport::Finish(const Trainer& trainer) {
  predicted_peak_allocated_bytes = trainer.predicted_peak_allocated_bytes();
  predicted_peak_reserved_bytes = trainer.predicted_peak_reserved_bytes();
  measured_peak_allocated_bytes = trainer.measured_peak_allocated_bytes();
  measured_peak_reserved_bytes = trainer.measured_peak_reserved_bytes();
  routing_assumed = trainer.config().moe_routing;
  plan = trainer.plan();
  routing_seen = Summarize(trainer.expert_load());
  error_pct = 100.0 *
              static_cast<double>(measured_peak_allocated_bytes - predicted_peak_allocated_bytes) /
              static_cast<double>(predicted_peak_allocated_bytes);
}

void WriteRunReport(const std::filesystem::path& path, const std::string& model, bool cuda,
                    const RunReport& r) {
  nlohmann::json predicted = {{"peak_allocated_bytes", r.predicted_peak_allocated_bytes}};
  nlohmann::json measured = {{"peak_allocated_bytes", r.measured_peak_allocated_bytes}};
  if (cuda) {
    predicted["peak_reserved_bytes"] = r.predicted_peak_reserved_bytes;
    measured["peak_reserved_bytes"] = r.measured_peak_reserved_bytes;
  }
  nlohmann::json j = {
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
      {"plan",
       {{"micro_batch", r.plan.config.micro_batch},
        {"grad_accum_steps", r.plan.config.grad_accum_steps},
        {"global_batch", r.plan.config.micro_batch * r.plan.config.grad_accum_steps},
        {"seq_len", r.plan.config.seq_len},
        {"precision", PrecisionName(r.plan.config.precision)},
        {"checkpoint", r.plan.config.checkpoint.ToString()},
        {"checkpointed_blocks", r.plan.num_checkpointed()}}},
  };
  if (r.budget) {
    j["budget"] = {{"bytes", r.budget->bytes}, {"source", r.budget->source}};
    if (!r.budget->device_name.empty()) j["budget"]["device_name"] = r.budget->device_name;
  }
  if (r.routing_seen.calls > 0) {
    j["moe_routing"] = {
        {"assumed", r.routing_assumed ? MoeRoutingName(*r.routing_assumed) : "balanced"},
        {"expert_sorts", r.routing_seen.calls},
        {"max_load_over_balanced", r.routing_seen.max_over_balanced},
        {"mean_max_load_over_balanced", r.routing_seen.mean_over_balanced},
        {"worst_case_load_over_balanced", r.routing_seen.worst_case_ratio}};
  }
  ThrowIfError(WriteFileAtomically(path, [&](std::ostream& out) { out << JsonText(j) << "\n"; }));
}

}  // namespace headroom
