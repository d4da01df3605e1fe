// The versions of the Python packages an imported graph depends on (torch, transformers,
// peft, and the kernel packages a plan names), which key the graph cache. Asking the
// interpreter costs a Python start on every plan, more than the cached plan it serves, so
// the answer is kept beside the cache while the directories Python loads packages from
// are unchanged: installing, removing or upgrading a package rewrites its directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "planner/core/result.h"

namespace headroom {

// "2.15.0 5.24.0 0.21.2[ 0.6.0 ...]", from `python` (the interpreter's command), with
// models/import/ (`importer_dir`) on its path for kernel_paths.py's table; kept under
// `cache_dir`. An error names what Python could not answer.
Result<std::string> InstalledPackageVersions(const std::string& python,
                                             const std::filesystem::path& importer_dir,
                                             const std::vector<std::string>& kernels,
                                             const std::filesystem::path& cache_dir);

}  // namespace headroom
