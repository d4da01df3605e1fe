// Measured against predicted: peak live tensor bytes of real training steps on the CPU
// (counted by the CPU allocator LibTorch allocates through) against PredictStep, over
// the tiny models of all three families and the grid of precision, checkpointing,
// micro-batch, fine-tuning mode and optimizer. Prints the table; each config must be
// within 2%. Run under ONEDNN_MAX_CPU_ISA=AVX512_CORE (ctest sets it) so that every CPU
// of this kind runs the same bf16 kernels.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/catalog.h"
#include "planner/plan/plan_request.h"
#include "runtime/trainer.h"

namespace headroom {
namespace {

struct ValidationConfig {
  const char* model;
  Precision precision;
  const char* checkpoint;  // none | all | alternate
  int64_t micro_batch;
  FineTuneMode mode;
  OptimizerKind optimizer;
  int64_t seq_len = 64;
};

std::string Describe(const ValidationConfig& c) {
  return std::string(c.model) + " " + std::string(PrecisionName(c.precision)) +
         " ckpt=" + c.checkpoint + " mb=" + std::to_string(c.micro_batch) + " " +
         (c.mode == FineTuneMode::kLora ? "lora" : "full") + " " +
         std::string(OptimizerName(c.optimizer)) +
         (c.seq_len != 64 ? " s=" + std::to_string(c.seq_len) : "");
}

std::vector<ValidationConfig> Configs() {
  using P = Precision;
  using M = FineTuneMode;
  using O = OptimizerKind;
  std::vector<ValidationConfig> out;
  const char* models[] = {"tiny-gpt2", "tiny-llama", "tiny-bert"};
  // Per family: the same 8 combinations, so every axis is covered in every family.
  for (const char* m : models) {
    out.push_back({m, P::kFp32, "none", 1, M::kFull, O::kAdamW});
    out.push_back({m, P::kFp32, "all", 2, M::kLora, O::kSgd});
    out.push_back({m, P::kAmpBf16, "alternate", 4, M::kFull, O::kAdamW});
    out.push_back({m, P::kAmpBf16, "none", 2, M::kLora, O::kAdamW});
    out.push_back({m, P::kBf16, "all", 1, M::kFull, O::kSgdMomentum});
    out.push_back({m, P::kBf16, "alternate", 2, M::kLora, O::kAdamW});
    out.push_back({m, P::kFp32, "alternate", 4, M::kFull, O::kSgdMomentum});
    out.push_back({m, P::kAmpBf16, "all", 4, M::kLora, O::kSgd});
  }
  // Qwen3 (per-head q/k norms), Phi-3 (fused projections), Gemma 2 and 3, Qwen3-MoE and
  // Mixtral (router and grouped_mm experts): the first four combinations.
  for (const char* m : {"tiny-qwen3", "tiny-phi3", "tiny-gemma2", "tiny-gemma3",
                        "tiny-qwen3-moe", "tiny-mixtral"}) {
    for (size_t i = 0; i < 4; ++i) {
      ValidationConfig c = out[8 + i];  // tiny-llama's
      c.model = m;
      out.push_back(c);
    }
  }
  // Past tiny-gemma3's 128-token window: SDPA with the bool window mask.
  out.push_back({"tiny-gemma3", P::kFp32, "none", 2, M::kFull, O::kAdamW, 160});
  out.push_back({"tiny-gemma3", P::kAmpBf16, "alternate", 2, M::kLora, O::kAdamW, 160});
  // fp32 master weights, once per family.
  out.push_back({"tiny-gpt2", P::kMixedBf16, "none", 2, M::kFull, O::kAdamW});
  out.push_back({"tiny-llama", P::kMixedBf16, "alternate", 2, M::kLora, O::kAdamW});
  out.push_back({"tiny-bert", P::kMixedBf16, "all", 4, M::kFull, O::kSgdMomentum});
  return out;
}

TEST(ValidationSuite, MeasuredPeakWithinTwoPercentOfPrediction) {
  std::printf("%-58s %14s %14s %8s\n", "config", "predicted", "measured", "error");
  int failures = 0;
  for (const ValidationConfig& c : Configs()) {
    const ModelSpec spec = *LoadCatalogModel(c.model);
    TrainingConfig config;
    config.micro_batch = c.micro_batch;
    config.grad_accum_steps = 2;
    config.seq_len = c.seq_len;
    config.precision = c.precision;
    config.optimizer = c.optimizer;
    config.fine_tune.mode = c.mode;
    config.fine_tune.lora_rank = 8;
    // SDPA as each device runs it: on the CPU, models with attention dropout run SDPA's
    // math kernel (planned as eager); tiny-llama has none and runs the flash kernel.
    config.attention = AttentionAsExecuted(spec, AttentionImpl::kSdpa, CpuDevice(int64_t{1} << 40));
    std::vector<bool> flags(spec.num_layers, std::string(c.checkpoint) == "all");
    if (std::string(c.checkpoint) == "alternate")
      for (size_t i = 0; i < flags.size(); i += 2) flags[i] = true;
    Trainer trainer(spec, config, flags, {.seed = 1});
    trainer.Step();
    trainer.Step();
    const double predicted = static_cast<double>(trainer.predicted_peak_allocated_bytes());
    const double measured = static_cast<double>(trainer.measured_peak_allocated_bytes());
    const double error = 100.0 * (measured - predicted) / predicted;
    std::printf("%-58s %14.0f %14.0f %7.2f%%\n", Describe(c).c_str(), predicted, measured, error);
    EXPECT_LE(std::abs(error), 2.0) << Describe(c);
    failures += std::abs(error) > 2.0;
  }
  std::printf("%d of %zu configs outside their bound\n", failures, Configs().size());
}

}  // namespace
}  // namespace headroom
