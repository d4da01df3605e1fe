#include "models/build_graph.h"

#include <fmt/format.h>

#include "models/model_import.h"

namespace headroom {

Result<OpGraph> BuildGraph(const ModelSpec& spec, const GraphOptions& options) {
  if (spec.family == ModelFamily::kImported) {
    // A plan file names the model by its sizes, which do not carry an imported graph.
    if (!spec.imported)
      return MakeError(
          fmt::format("{} is an imported model type; plan files do not carry its "
                      "graph: pass --model with its config.json",
                      spec.name));
    // Refused before the import runs, which takes seconds to minutes.
    if (auto ok = CheckImportedCpuKernel(spec.imported->model_type(), options); !ok)
      return ok.error();
    auto graph = spec.imported->GraphFor(TraceRegimeOf(options), options.seq_len);
    if (!graph) return graph.error();
    return ExpandImportedGraph(**graph, options);
  }
  std::set<std::string> lora_roles;
  if (options.fine_tune.mode != FineTuneMode::kFull) {
    if (options.fine_tune.lora_rank <= 0) {
      return MakeError(fmt::format("LoRA rank must be a positive integer (got {})",
                                   options.fine_tune.lora_rank));
    }
    auto roles = ResolveLoraRoles(spec, options.fine_tune.lora_targets);
    if (!roles) return roles.error();
    lora_roles = *roles;
  }
  OpGraph graph;
  LayerBuilder layers(graph, spec, options, std::move(lora_roles));
  switch (spec.family) {
    case ModelFamily::kGpt2:
      BuildGpt2Graph(spec, layers);
      break;
    case ModelFamily::kLlama:
    case ModelFamily::kQwen3:
    case ModelFamily::kQwen3Moe:
    case ModelFamily::kMixtral:
      BuildLlamaGraph(spec, layers);
      break;
    case ModelFamily::kBert:
      BuildBertGraph(spec, layers);
      break;
    case ModelFamily::kPhi3:
      BuildPhi3Graph(spec, layers);
      break;
    case ModelFamily::kGemma2:
    case ModelFamily::kGemma3:
      BuildGemmaGraph(spec, layers);
      break;
    case ModelFamily::kImported:
      break;
  }
  graph.CheckWellFormed();
  return graph;
}

}  // namespace headroom
