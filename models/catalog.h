// The built-in model catalog (YAML specs shipped in models/catalog/) and resolution of
// a --model argument: a catalog name, a YAML spec file, a Hugging Face config.json (or a
// directory holding one), or a Hugging Face Hub id (models/hub_config.h).
#pragma once

#include "models/layer.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/model_spec.h"
#include "planner/core/embedded_file.h"
#include "planner/core/result.h"

namespace headroom {

std::span<const EmbeddedFile> ModelCatalogFiles();  // generated at build time

std::vector<std::string> CatalogModelNames();
// The first comment line of the catalog file: what the entry is.
std::string CatalogDescription(std::string_view name);
// The entry whose source, the "(ORG/NAME)" that ends its first comment line, is
// `hub_id`; compared ignoring case, as the Hub resolves ids.
std::optional<std::string> CatalogNameForHubId(std::string_view hub_id);
Result<ModelSpec> LoadCatalogModel(std::string_view name);
// What planning a model may run: transformers' own code only, unless the user opts in to
// the code a config's auto_map names (beside the config; the import runs it on fake
// tensors, models/import/headroom_import.py).
struct ModelSourceOptions {
  bool trust_remote_code = false;
};

// An existing file or directory, else a Hub id (its catalog entry, else its config.json
// from the Hugging Face cache or the Hub, named by the id), else a catalog name.
Result<ModelSpec> ResolveModel(std::string_view name_or_path, ModelSourceOptions options = {});

}  // namespace headroom
