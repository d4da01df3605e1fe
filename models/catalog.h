// The built-in model catalog (YAML specs shipped in models/catalog/) and resolution of
// a --model argument: a catalog name, a YAML spec file, or a Hugging Face config.json
// (or a directory holding one).
#pragma once

#include "models/layer.h"

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
Result<ModelSpec> LoadCatalogModel(std::string_view name);
Result<ModelSpec> ResolveModel(std::string_view name_or_path);

}  // namespace headroom
