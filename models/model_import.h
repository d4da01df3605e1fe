// Models planned from their own transformers code: a config.json whose model_type has no
// builder, or a graph file `headroom import` wrote. The import itself runs python3 with
// torch and transformers (models/import/headroom_import.py) once per regime a plan asks
// for, and is cached; the planner only reads the graph file it writes.
#pragma once

#include "models/layer.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/graph_file.h"
#include "models/model_spec.h"

namespace headroom {

// The graphs of one imported model, one per regime, imported when first asked for.
class ImportedModel {
 public:
  using Importer = std::function<Result<ImportedGraph>(const TraceRegime&)>;
  // `seq_thresholds`: the config's sliding window and attention chunk, where transformers'
  // program changes with the sequence length; `sequence_chunk`: the chunk Mamba-2's
  // reference code splits the sequence into (0: none), whose program differs for one
  // chunk, for more, and for whole multiples of it.
  ImportedModel(std::string model_type, Importer importer, std::vector<int64_t> seq_thresholds,
                int64_t sequence_chunk = 0);
  // A graph file: the regime it was recorded under, and no other.
  explicit ImportedModel(ImportedGraph graph);

  const std::string& model_type() const { return model_type_; }
  // `regime` traced from the largest sliding window or attention chunk `seq_len` reaches,
  // at multiples of the sequence chunk when `seq_len` is one.
  TraceRegime RegimeFor(TraceRegime regime, int64_t seq_len) const;
  // The graph of `regime` for sequences of `seq_len` tokens.
  Result<std::shared_ptr<const ImportedGraph>> GraphFor(TraceRegime regime, int64_t seq_len) const;

 private:
  // Runs the importer for `regime` and keeps its graph (mutex_ held).
  Result<std::shared_ptr<const ImportedGraph>> Import(const TraceRegime& regime) const;

  std::string model_type_;
  Importer importer_;
  std::vector<int64_t> seq_thresholds_;
  int64_t sequence_chunk_ = 0;
  // The chunk of a loop over the sequence, found by the first import (0: none found).
  mutable std::atomic<int64_t> learned_chunk_{0};
  mutable std::mutex mutex_;
  mutable std::vector<std::shared_ptr<const ImportedGraph>> graphs_;
};

// The spec of a model whose graph comes from `graph` (its sizes, for reports and checks).
ModelSpec ImportedSpec(const ImportedGraph& graph, std::shared_ptr<const ImportedModel> model);

// A graph file written by `headroom import`.
Result<ModelSpec> LoadGraphFile(std::string_view text, const std::filesystem::path& path);

// A config.json of a model_type no builder plans: the spec imports its graph for each
// regime a plan asks for (the first import of each takes seconds; later ones are read
// from the cache).
// With `trust_remote_code`, a model_type transformers does not ship is imported from the
// code its auto_map names in the config's directory.
Result<ModelSpec> ImportableModel(std::string_view config_text, const std::filesystem::path& path,
                                  std::string_view model_type, bool trust_remote_code = false);

// `headroom import`: the graph file of the config.json at `config` (a built type too: its
// graph then comes from transformers' code rather than the builder) for `options`.
Result<std::string> ImportGraphFileFor(const std::filesystem::path& config,
                                       const GraphOptions& options, bool trust_remote_code = false);

// The model types headroom builds by hand (models/hf_config.cc), and whether one is.
std::span<const std::string_view> BuiltModelTypes();
bool HasGraphBuilder(std::string_view model_type);

// Runs the importer for `config` under `regime`, through the cache
// ($HEADROOM_CACHE, else $XDG_CACHE_HOME/headroom, else ~/.cache/headroom): the graph
// file's text, or the graph read from it. A non-empty `remote_code_dir` lets the importer
// run the model code there that the config's auto_map names (its .py files join the
// cache key).
Result<std::string> ImportGraphText(const std::filesystem::path& config,
                                    std::string_view config_text, const TraceRegime& regime,
                                    const std::filesystem::path& remote_code_dir = {});
Result<ImportedGraph> ImportGraph(const std::filesystem::path& config, std::string_view config_text,
                                  const TraceRegime& regime,
                                  const std::filesystem::path& remote_code_dir = {});

}  // namespace headroom
