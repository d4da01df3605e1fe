#include "models/catalog.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "models/hf_config.h"
#include "models/hub_config.h"
#include "models/model_import.h"
#include "models/python_json.h"
#include "planner/core/file_io.h"
#include "planner/core/name_suggest.h"

namespace headroom {

std::vector<std::string> CatalogModelNames() {
  std::vector<std::string> names;
  for (const EmbeddedFile& f : ModelCatalogFiles()) names.emplace_back(f.name);
  return names;
}

std::string CatalogDescription(std::string_view name) {
  for (const EmbeddedFile& f : ModelCatalogFiles()) {
    if (f.name != name) continue;
    if (!f.text.starts_with("# ")) return "";
    return std::string(f.text.substr(2, f.text.find('\n') - 2));
  }
  return "";
}

std::optional<std::string> CatalogNameForHubId(std::string_view hub_id) {
  for (const std::string& name : CatalogModelNames()) {
    const std::string first_line = CatalogDescription(name);
    if (!first_line.ends_with(')')) continue;
    const size_t open = first_line.rfind('(');
    if (open == std::string::npos) continue;
    const std::string_view source =
        std::string_view(first_line).substr(open + 1, first_line.size() - open - 2);
    if (AsciiLower(source) == AsciiLower(hub_id)) return name;
  }
  return std::nullopt;
}

Result<ModelSpec> LoadCatalogModel(std::string_view name) {
  for (const EmbeddedFile& f : ModelCatalogFiles()) {
    if (f.name == name) return ParseModelSpecYaml(f.text, fmt::format("built-in model {}", name));
  }
  return MakeError(fmt::format(
      "unknown model '{}'.{} Run `headroom models` for the catalog, or pass a YAML spec "
      "or a Hugging Face config.json path.",
      name, DidYouMean(name, CatalogModelNames())));
}

namespace {

// A config.json (built, or imported when no builder plans its model_type) or a graph
// file `headroom import` wrote.
Result<ModelSpec> ModelOfJson(const std::string& text, const std::filesystem::path& path,
                              ModelSourceOptions options) {
  nlohmann::json root;
  try {
    root = ParsePythonJson(text);
  } catch (const nlohmann::json::exception&) {
    return ParseHfConfigJson(text, path.string());  // which says what is malformed
  }
  if (root.is_object() && root.value("format", "") == "headroom-graph")
    return LoadGraphFile(text, path);
  if (root.is_object() && root.contains("model_type") && root["model_type"].is_string() &&
      !HasGraphBuilder(root["model_type"].get<std::string>()))
    return ImportableModel(text, path, root["model_type"].get<std::string>(),
                           options.trust_remote_code);
  return ParseHfConfigJson(text, path.string());
}

Result<ModelSpec> ResolveHubModel(std::string_view hub_id, ModelSourceOptions options) {
  if (std::optional<std::string> name = CatalogNameForHubId(hub_id)) return LoadCatalogModel(*name);
  const auto is_model = [options](const HubConfig& c) -> std::optional<Error> {
    Result<ModelSpec> parsed = ModelOfJson(c.text, c.origin, options);
    if (!parsed) return parsed.error();
    return std::nullopt;
  };
  Result<HubConfig> config = FetchHubConfig(hub_id, HubSettingsFromEnvironment(), is_model);
  if (!config) return config.error();
  Result<ModelSpec> spec = ModelOfJson(config->text, config->origin, options);
  if (spec) spec->name = std::string(hub_id);
  return spec;
}

}  // namespace

Result<ModelSpec> ResolveModel(std::string_view name_or_path, ModelSourceOptions options) {
  namespace fs = std::filesystem;
  fs::path path(name_or_path);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (IsHubModelId(name_or_path)) return ResolveHubModel(name_or_path, options);
    const bool looks_like_path = name_or_path.find('/') != std::string_view::npos ||
                                 path.extension() == ".json" || path.extension() == ".yaml" ||
                                 path.extension() == ".yml";
    if (looks_like_path)
      return MakeError(fmt::format("model file '{}' does not exist", name_or_path));
    return LoadCatalogModel(name_or_path);
  }
  if (fs::is_directory(path, ec)) path /= "config.json";
  Result<std::string> text = ReadRegularFile(path);
  if (!text) return MakeError("--model: " + text.error().message);
  if (path.extension() == ".json") return ModelOfJson(*text, path, options);
  return ParseModelSpecYaml(*text, path.string());
}

}  // namespace headroom
