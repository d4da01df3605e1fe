// An imported graph with its plain views read through (models/view_folding.h) replays the
// same step as the graph with every recorded op: the same allocations and frees in the
// same order, so the same peaks, breakdown and place of the peak. Checked on the graph
// `headroom import` wrote for Llama-3-8B, bf16 LoRA r16 on q and v (bench/data).
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bench/imported_graph_configs.h"
#include "models/graph_file.h"
#include "planner/core/file_io.h"
#include "planner/simulate/step_prediction.h"

namespace headroom {
namespace {

std::string EventText(const MemoryEvent& e) {
  return fmt::format("{} {} bytes, category {}{}",
                     e.kind == MemoryEvent::Kind::kAlloc ? "alloc" : "free", e.bytes,
                     static_cast<int>(e.category), e.per_sample ? ", per sample" : "");
}

TEST(ViewFolding, ReplaysTheSameStepAsEveryRecordedOp) {
  Result<std::string> text = ReadRegularFile(bench_graphs::kLlama3, int64_t{1} << 30);
  ASSERT_TRUE(text) << text.error().message;
  Result<ImportedGraph> imported = ParseImportedGraph(*text, bench_graphs::kLlama3);
  ASSERT_TRUE(imported) << imported.error().message;
  const DeviceSpec device = CpuDevice(int64_t{1} << 40);
  for (const int64_t micro_batch : {1, 3}) {
    for (const int64_t seq_len : {512, 2048}) {
      const TrainingConfig config = bench_graphs::Llama3Lora(micro_batch, seq_len);
      Result<OpGraph> folded = ExpandImportedGraph(*imported, GraphOptionsOf(config));
      Result<OpGraph> whole =
          ExpandImportedGraph(*imported, GraphOptionsOf(config), {.fold_views = false});
      ASSERT_TRUE(folded) << folded.error().message;
      ASSERT_TRUE(whole) << whole.error().message;
      // The file's sections: a 14-op prologue, 32 layers of 102 ops and the epilogue (20
      // ops at micro-batch 1, where the loss makes no clone of the logits; else 21). Of
      // each layer's ops, 20 views of an activation only they read and the 7 transposes of
      // frozen weights are read through; in layer 0, a template of its own, 6 views fewer
      // (its input, the frozen embedding's output, takes no gradient, nor do the base
      // projections' outputs it makes: views of those pass `none` and stay); so are 5 of
      // the epilogue's views.
      EXPECT_EQ(whole->num_ops(), 14 + 32 * 102 + (micro_batch == 1 ? 20 : 21));
      EXPECT_EQ(folded->num_ops(), whole->num_ops() - 31 * 27 - 21 - 5);
      for (const bool checkpointed : {false, true}) {
        SCOPED_TRACE(fmt::format("micro-batch {}, s = {}, checkpointed: {}", micro_batch, seq_len,
                                 checkpointed));
        const std::vector<bool> blocks(whole->blocks().size(), checkpointed);
        const StepPrediction a = PredictStep(*folded, config, blocks, device);
        const StepPrediction b = PredictStep(*whole, config, blocks, device);
        EXPECT_EQ(a.allocated_peak_bytes, b.allocated_peak_bytes);
        EXPECT_EQ(a.reserved_peak_bytes, b.reserved_peak_bytes);
        EXPECT_EQ(a.first_step_peak_bytes, b.first_step_peak_bytes);
        EXPECT_EQ(a.steady_step_peak_bytes, b.steady_step_peak_bytes);
        EXPECT_EQ(a.breakdown, b.breakdown);
        EXPECT_EQ(a.peak_phase_text, b.peak_phase_text);
        ASSERT_EQ(a.timeline.events.size(), b.timeline.events.size());
        for (size_t i = 0; i < a.timeline.events.size(); ++i) {
          ASSERT_EQ(EventText(a.timeline.events[i]), EventText(b.timeline.events[i]))
              << "event " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace headroom
