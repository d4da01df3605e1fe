#include "models/python_versions.h"

#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "models/cache_key.h"
#include "models/subprocess.h"
#include "planner/core/file_io.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;

// Line 1: the versions; line 2: the directories on sys.path, as JSON.
constexpr const char* kAsk =
    "import importlib.metadata as m, json, sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from kernel_paths import KERNEL_PACKAGES, kernels_path\n"
    "sys.path.append(kernels_path())\n"
    "print(*(m.version(p) for p in ('torch', 'transformers', 'peft')),\n"
    "      *(m.version(KERNEL_PACKAGES[k]) for k in sys.argv[2:]))\n"
    "print(json.dumps([p for p in sys.path if p]))\n";

// A directory's modification time, -1 when it is not there.
int64_t ModifiedAt(const std::string& dir) {
  std::error_code ec;
  const auto t = fs::last_write_time(dir, ec);
  return ec ? -1 : static_cast<int64_t>(t.time_since_epoch().count());
}

// What picks the interpreter and what it loads: the command, the environment that finds
// it and shapes sys.path, the kernel packages asked for.
std::string KeyOf(const std::string& python, const fs::path& importer_dir,
                  const std::vector<std::string>& kernels) {
  std::string key = fmt::format("{}|{}|{}", python, importer_dir.string(), fmt::join(kernels, ","));
  for (const char* name : {"PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX",
                           "HEADROOM_KERNELS_PATH", "XDG_DATA_HOME", "HOME"}) {
    const char* v = std::getenv(name);
    key += fmt::format("|{}={}", name, v ? v : "");
  }
  return key;
}

// The kept answer, when it was kept for this key and no directory changed since.
std::string KeptVersions(const fs::path& file, const std::string& key) {
  Result<std::string> text = ReadRegularFile(file, 1 << 20);
  if (!text) return "";
  const nlohmann::json kept = nlohmann::json::parse(*text, nullptr, false);
  if (!kept.is_object() || kept.value("key", "") != key || !kept.contains("dirs") ||
      !kept["dirs"].is_array() || !kept.contains("versions") || !kept["versions"].is_string())
    return "";
  for (const nlohmann::json& d : kept["dirs"]) {
    if (!d.is_array() || d.size() != 2 || !d[0].is_string() || !d[1].is_number_integer() ||
        ModifiedAt(d[0].get<std::string>()) != d[1].get<int64_t>())
      return "";
  }
  return kept["versions"].get<std::string>();
}

}  // namespace

Result<std::string> InstalledPackageVersions(const std::string& python,
                                             const fs::path& importer_dir,
                                             const std::vector<std::string>& kernels,
                                             const fs::path& cache_dir) {
  const std::string key = KeyOf(python, importer_dir, kernels);
  const fs::path file = cache_dir / fmt::format("python-{:016x}.json", Fnv1a(key));
  if (std::string kept = KeptVersions(file, key); !kept.empty()) return kept;
  std::vector<std::string> argv = {python, "-c", kAsk, importer_dir.string()};
  argv.insert(argv.end(), kernels.begin(), kernels.end());
  Result<ProcessResult> run = RunProcess(argv);
  if (!run) return run.error();
  const size_t newline = run->out.find('\n');
  if (run->exit_code != 0 || newline == std::string::npos) {
    return MakeError(run->last_error_line.empty() ? fmt::format("exit {}", run->exit_code)
                                                  : run->last_error_line);
  }
  const std::string versions = run->out.substr(0, newline);
  const nlohmann::json dirs = nlohmann::json::parse(run->out.substr(newline + 1), nullptr, false);
  nlohmann::json kept = {{"key", key}, {"versions", versions}, {"dirs", nlohmann::json::array()}};
  for (const nlohmann::json& d : dirs.is_array() ? dirs : nlohmann::json::array()) {
    if (d.is_string()) kept["dirs"].push_back({d, ModifiedAt(d.get<std::string>())});
  }
  // Kept only where it can be checked: a failed write costs the next plan a Python start.
  if (dirs.is_array() && !CreateParentDirectories(file))
    (void)WriteFileAtomically(file, kept.dump(), AtSymlink::kReplace);
  return versions;
}

}  // namespace headroom
