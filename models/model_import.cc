#include "models/model_import.h"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/python_json.h"
#include "planner/core/file_io.h"
#include "planner/core/limits.h"

namespace headroom {

ImportedModel::ImportedModel(std::string model_type, Importer importer,
                             std::vector<int64_t> seq_thresholds, int64_t sequence_chunk)
    : model_type_(std::move(model_type)),
      importer_(std::move(importer)),
      seq_thresholds_(std::move(seq_thresholds)),
      sequence_chunk_(sequence_chunk) {
  // Past one chunk the reshapes into chunks copy (one chunk is contiguous): another program.
  if (sequence_chunk_ > 0) seq_thresholds_.push_back(sequence_chunk_ + 1);
}

ImportedModel::ImportedModel(ImportedGraph graph) : model_type_(graph.model_type) {
  graphs_.push_back(std::make_shared<const ImportedGraph>(std::move(graph)));
}

TraceRegime ImportedModel::RegimeFor(TraceRegime regime, int64_t seq_len) const {
  for (int64_t threshold : seq_thresholds_) {
    if (threshold <= seq_len) regime.min_seq_len = std::max(regime.min_seq_len, threshold);
  }
  const int64_t chunk = sequence_chunk_ > 0 ? sequence_chunk_ : learned_chunk_.load();
  if (chunk > 0 && seq_len > 0 && seq_len % chunk == 0) regime.seq_multiple = chunk;
  return regime;
}

Result<std::shared_ptr<const ImportedGraph>> ImportedModel::GraphFor(TraceRegime wanted,
                                                                     int64_t seq_len) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const TraceRegime regime = RegimeFor(wanted, seq_len);
  for (const auto& graph : graphs_) {
    if (graph->regime == regime) return graph;
  }
  // A graph file holds its own regime only: ExpandImportedGraph says which it was.
  if (!importer_) return graphs_.front();
  Result<std::shared_ptr<const ImportedGraph>> graph = Import(regime);
  if (!graph) return graph;
  // No config field names the chunks a loop in the model's code runs over (the gated
  // delta rule's reference scan: 64 tokens); the import finds them, and a sequence of
  // whole chunks is another program, imported in turn.
  if (sequence_chunk_ == 0 && (*graph)->sequence_chunk > 0 && learned_chunk_.load() == 0) {
    learned_chunk_ = (*graph)->sequence_chunk;
    const TraceRegime learned = RegimeFor(wanted, seq_len);
    if (!(learned == regime)) return Import(learned);
  }
  return graph;
}

Result<std::shared_ptr<const ImportedGraph>> ImportedModel::Import(
    const TraceRegime& regime) const {
  Result<ImportedGraph> imported = importer_(regime);
  if (!imported) {
    return MakeError(
        fmt::format("model_type '{}': its graph is imported from its transformers code: {}",
                    model_type_, imported.error().message));
  }
  if (!(imported->regime == regime)) {
    return MakeError(fmt::format("the import of {} recorded {}, not the {} asked for", model_type_,
                                 DescribeRegime(imported->regime), DescribeRegime(regime)));
  }
  graphs_.push_back(std::make_shared<const ImportedGraph>(std::move(*imported)));
  return graphs_.back();
}

ModelSpec ImportedSpec(const ImportedGraph& graph, std::shared_ptr<const ImportedModel> model) {
  ModelSpec spec;
  spec.name = graph.name.empty() ? graph.model_type : graph.name;
  spec.family = ModelFamily::kImported;
  spec.model_type = graph.model_type;
  spec.vocab_size = graph.vocab_size;
  spec.hidden_size = graph.hidden_size;
  spec.num_layers = graph.num_layers;
  spec.num_heads = graph.num_heads;
  spec.max_positions = graph.max_positions;
  spec.imported = std::move(model);
  return spec;
}

Result<ModelSpec> LoadGraphFile(std::string_view text, const std::filesystem::path& path) {
  Result<ImportedGraph> graph = ParseImportedGraph(text, path.string());
  if (!graph) return graph.error();
  auto model = std::make_shared<const ImportedModel>(*graph);
  return ImportedSpec(*graph, std::move(model));
}

Result<std::string> ImportGraphFileFor(const std::filesystem::path& config,
                                       const GraphOptions& options, bool trust_remote_code) {
  Result<std::string> text = ReadRegularFile(config);
  if (!text) return text.error();
  nlohmann::json root;
  try {
    root = ParsePythonJson(*text);
  } catch (const nlohmann::json::exception& e) {
    return MakeError(fmt::format("{}: not a valid config.json ({})", config.string(), e.what()));
  }
  if (!root.is_object() || !root.contains("model_type") || !root["model_type"].is_string())
    return MakeError(fmt::format("{}: missing field 'model_type'", config.string()));
  Result<ModelSpec> spec =
      ImportableModel(*text, config, root["model_type"].get<std::string>(), trust_remote_code);
  if (!spec) return spec.error();
  // The regime the plan runs, a loop's chunk learned from a first import (GraphFor); the
  // file is that import's text, from the cache.
  Result<std::shared_ptr<const ImportedGraph>> graph =
      spec->imported->GraphFor(TraceRegimeOf(options), options.seq_len);
  if (!graph) return graph.error();
  return ImportGraphText(config, *text, (*graph)->regime,
                         trust_remote_code ? config.parent_path() : std::filesystem::path());
}

std::span<const std::string_view> BuiltModelTypes() {
  // gemma3 (multimodal: Gemma3ForConditionalGeneration, a SigLIP vision tower beside the
  // text model) is imported; its text model, gemma3_text, is built.
  static constexpr std::array<std::string_view, 11> kBuilt = {
      "llama",       "mistral",   "qwen2",   "qwen3", "phi3", "gemma2",
      "gemma3_text", "qwen3_moe", "mixtral", "gpt2",  "bert"};
  return kBuilt;
}

bool HasGraphBuilder(std::string_view model_type) {
  const std::span<const std::string_view> built = BuiltModelTypes();
  return std::find(built.begin(), built.end(), model_type) != built.end();
}

Result<ModelSpec> ImportableModel(std::string_view config_text, const std::filesystem::path& path,
                                  std::string_view model_type, bool trust_remote_code) {
  // The sizes reports need come from the first import: the one the plan's own regime asks
  // for is made when the plan builds its graph, so the spec is filled lazily from it.
  const nlohmann::json root = ParsePythonJson(config_text);
  const nlohmann::json& text =
      root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
  const auto field = [&](const char* key) -> int64_t {
    return text.contains(key) && text[key].is_number_integer() ? text[key].get<int64_t>() : 0;
  };
  std::vector<int64_t> thresholds;
  for (const char* key : {"sliding_window", "attention_chunk_size"}) {
    if (field(key) > 0) thresholds.push_back(field(key));
  }
  // Mamba-2's chunk (modeling_nemotron_h.py: chunk_size; Granite 4, Bamba: mamba_chunk_size).
  const int64_t sequence_chunk = std::max(field("chunk_size"), field("mamba_chunk_size"));
  auto model = std::make_shared<const ImportedModel>(
      std::string(model_type),
      [path, config = std::string(config_text),
       code_dir = trust_remote_code ? path.parent_path() : std::filesystem::path()](
          const TraceRegime& regime) { return ImportGraph(path, config, regime, code_dir); },
      std::move(thresholds), sequence_chunk);
  ModelSpec spec;
  // As the importer names its graph (headroom_import.py: _name_or_path, else
  // config_file_name): a config.json by its folder, any other file by its stem.
  if (root.contains("_name_or_path") && root["_name_or_path"].is_string())
    spec.name = root["_name_or_path"].get<std::string>();
  if (spec.name.empty())
    spec.name =
        (path.filename() == "config.json" ? path.parent_path().filename() : path.stem()).string();
  if (spec.name.empty()) spec.name = std::string(model_type);
  spec.family = ModelFamily::kImported;
  spec.model_type = std::string(model_type);
  spec.imported = std::move(model);
  // The sizes reports and checks read, from the config's standard fields (a multimodal
  // config keeps them in text_config).
  spec.vocab_size = field("vocab_size");
  spec.hidden_size = field("hidden_size");
  spec.num_layers = field("num_hidden_layers");
  spec.num_heads = field("num_attention_heads");
  spec.max_positions = field("max_position_embeddings");
  if (spec.max_positions <= 0) spec.max_positions = limits::kMaxPositions;
  return spec;
}

}  // namespace headroom
