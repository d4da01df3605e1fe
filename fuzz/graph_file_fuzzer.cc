// The imported graph file (--model graph.json, docs/graph-file.md): any bytes either fail
// with an error that says what is wrong, or give a model whose graph expands under the
// regime the file names and whose short step predicts or is refused as too large.
#include "fuzz/check_model.h"
#include "models/model_import.h"

namespace {

// The training config the file's regime describes, at a short sequence inside its band.
headroom::TrainingConfig ConfigOfRegime(const headroom::ImportedGraph& g) {
  using namespace headroom;
  TrainingConfig c;
  c.kernels = {.cuda = false, .cpu_bf16 = CpuBf16::kAtenGemm, .cpu_threads = 1};
  if (auto p = ParsePrecision(g.regime.precision)) c.precision = *p;
  if (g.regime.mode == "lora") {
    c.fine_tune = {.mode = FineTuneMode::kLora,
                   .lora_rank = g.regime.lora_rank,
                   .lora_targets = g.regime.lora_targets};
    if (auto d = ParseDType(g.regime.base_dtype)) c.base_dtype = *d;
  }
  if (auto a = ParseAttention(g.regime.attention)) c.attention = *a;
  if (!g.regime.kv_cache) c.checkpoint.kind = CheckpointPolicy::Kind::kAll;
  c.seq_len = std::max<int64_t>(g.min_seq_len, 16);
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string text(fuzz::AsText(data, size));
  const Result<ImportedGraph> graph = ParseImportedGraph(text, "graph.json");
  if (!graph) {
    fuzz::Require(!graph.error().message.empty(), "an error says what is wrong");
    return 0;
  }
  const Result<ModelSpec> spec = LoadGraphFile(text, "graph.json");
  fuzz::Require(spec.ok(), "a file that parses loads");
  PlanRequest request{
      .model = *spec, .config = ConfigOfRegime(*graph), .device = CpuDevice(int64_t{1} << 40)};
  const Result<StepPrediction> step = Predict(request);
  if (step) fuzz::Require(step->allocated_peak_bytes > 0, "a step allocates");
  return 0;
}
