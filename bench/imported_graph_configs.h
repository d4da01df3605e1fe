// The plans the graph files in bench/data were imported for, shared by the benchmarks and
// the tests that expand those files: an expansion is refused for any other regime.
//  - llama-3-8b-bf16-lora16.graph.json: Llama-3-8B, bf16 LoRA r16 on q_proj and v_proj
//    (models/import/headroom_import.py tests/reference/configs/llama-3-8b.json
//    --precision bf16 --lora-rank 16);
//  - qwen3-next-80b-a3b-bf16-lora16.graph.json: Qwen3-Next-80B-A3B, bf16 LoRA r16 on the
//    DeltaNet and attention projections, sequences of whole 64-token chunks (the cache
//    file `headroom plan --model tests/reference/configs/qwen3-next-80b-a3b.json --device
//    cpu --cpu-bf16 aten --precision bf16 --lora-rank 16 --lora-targets
//    in_proj_qkvz,out_proj,q_proj,k_proj,v_proj,o_proj --seq-len 32768` wrote).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "planner/core/training_config.h"

namespace headroom::bench_graphs {

inline constexpr const char* kLlama3 = HEADROOM_BENCH_DATA "/llama-3-8b-bf16-lora16.graph.json";
inline constexpr const char* kQwen3Next =
    HEADROOM_BENCH_DATA "/qwen3-next-80b-a3b-bf16-lora16.graph.json";

// bf16 LoRA r16 on the CPU with ATen's gemm, as both files were imported.
inline TrainingConfig CpuBf16Lora(int64_t micro_batch, int64_t seq_len,
                                  std::vector<std::string> targets) {
  TrainingConfig c;
  c.micro_batch = micro_batch;
  c.seq_len = seq_len;
  c.precision = Precision::kBf16;
  c.fine_tune = {.mode = FineTuneMode::kLora, .lora_rank = 16};
  c.fine_tune.lora_targets = std::move(targets);
  c.kernels = {.cuda = false, .cpu_bf16 = CpuBf16::kAtenGemm, .cpu_threads = 2};
  c.optimizer_impl = OptimizerImpl::kForLoop;
  return c;
}

inline TrainingConfig Llama3Lora(int64_t micro_batch, int64_t seq_len) {
  return CpuBf16Lora(micro_batch, seq_len, {"q_proj", "v_proj"});
}

inline TrainingConfig Qwen3NextLora(int64_t micro_batch, int64_t seq_len) {
  return CpuBf16Lora(micro_batch, seq_len,
                     {"in_proj_qkvz", "out_proj", "q_proj", "k_proj", "v_proj", "o_proj"});
}

}  // namespace headroom::bench_graphs
