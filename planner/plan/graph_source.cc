#include "planner/plan/graph_source.h"

#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "models/build_graph.h"

namespace headroom {

GraphSource GraphsOf(const ModelSpec& model) {
  struct Built {
    ModelSpec model;
    std::mutex mutex;
    std::vector<std::pair<GraphOptions, std::shared_ptr<const OpGraph>>> graphs;
  };
  auto built = std::make_shared<Built>();
  built->model = model;
  return [built](const TrainingConfig& config) -> std::shared_ptr<const OpGraph> {
    const GraphOptions options = GraphOptionsOf(config);
    const std::lock_guard<std::mutex> lock(built->mutex);
    for (const auto& [key, graph] : built->graphs)
      if (key == options) return graph;
    Result<OpGraph> graph = BuildGraph(built->model, options);
    // The request's own graph was built with the same spec and checked options; these
    // differ from it only in what the stack does at another batch or checkpoint policy.
    if (!graph && built->model.family == ModelFamily::kImported)
      throw GraphUnavailable(graph.error().message);
    if (!graph) throw std::logic_error("GraphsOf: " + graph.error().message);
    built->graphs.emplace_back(options, std::make_shared<const OpGraph>(std::move(*graph)));
    return built->graphs.back().second;
  };
}

}  // namespace headroom
