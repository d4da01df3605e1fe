// ImportGraph: runs models/import/headroom_import.py for one regime and keeps what it
// writes in a cache keyed by the config's bytes, the regime and the installed torch and
// transformers versions, so that a second plan of the same model reads a file.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <system_error>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/cache_key.h"
#include "models/model_import.h"
#include "models/python_versions.h"
#include "models/subprocess.h"
#include "planner/core/file_io.h"

#ifndef HEADROOM_IMPORTER_SCRIPT
#define HEADROOM_IMPORTER_SCRIPT "models/import/headroom_import.py"
#endif

namespace headroom {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxGraphFileBytes = int64_t{1} << 30;

std::string EnvOr(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

fs::path CacheDir() {
  if (const char* v = std::getenv("HEADROOM_CACHE"); v && *v) return fs::path(v) / "graphs";
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v)
    return fs::path(v) / "headroom" / "graphs";
  return fs::path(EnvOr("HOME", ".")) / ".cache" / "headroom" / "graphs";
}

// The .py files of `dir`, in name order, hashed into `h`: the importer's own code (a
// changed importer records again rather than serve what an older one wrote) and a
// trusted model's.
uint64_t PythonFilesHash(const fs::path& dir, uint64_t h) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".py") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    if (Result<std::string> text = ReadRegularFile(f)) h = Fnv1a(*text, h);
  }
  return h;
}

// The importer's arguments for `regime`, or an error for what it cannot record.
Result<std::vector<std::string>> ImporterArgs(const TraceRegime& regime) {
  if (regime.device != "cpu" && regime.device != "cuda")
    return MakeError(
        fmt::format("importing a model's graph for {} is not implemented", regime.device));
  if (regime.precision != "fp32" && regime.precision != "bf16" && regime.precision != "amp-bf16")
    return MakeError(
        fmt::format("importing a model's graph under {} is not implemented "
                    "(fp32, bf16 and amp-bf16 are)",
                    regime.precision));
  if (regime.stack != "pytorch")
    return MakeError(
        fmt::format("importing a model's graph for the {} stack is not "
                    "implemented (a plain PyTorch loop, --stack pytorch, is)",
                    regime.stack));
  if (regime.mode == "qlora")
    return MakeError("importing a model's graph for QLoRA is not implemented");
  std::vector<std::string> args = {"--device",       regime.device, "--precision",
                                   regime.precision, "--attention", regime.attention};
  if (regime.device == "cuda") args.insert(args.end(), {"--sm", std::to_string(regime.sm)});
  if (regime.mode == "lora") {
    args.insert(args.end(), {"--lora-rank", std::to_string(regime.lora_rank), "--lora-targets",
                             fmt::format("{}", fmt::join(regime.lora_targets, ",")), "--base-dtype",
                             regime.base_dtype});
  }
  if (!regime.kv_cache) args.push_back("--checkpointing");
  if (regime.min_seq_len > 0)
    args.insert(args.end(), {"--min-seq-len", std::to_string(regime.min_seq_len)});
  if (regime.seq_multiple > 0)
    args.insert(args.end(), {"--seq-multiple", std::to_string(regime.seq_multiple)});
  if (regime.images > 0) args.insert(args.end(), {"--images", std::to_string(regime.images)});
  if (!regime.kernels.empty())
    args.insert(args.end(), {"--kernels", fmt::format("{}", fmt::join(regime.kernels, ","))});
  return args;
}

}  // namespace

Result<std::string> ImportGraphText(const fs::path& config, std::string_view config_text,
                                    const TraceRegime& regime, const fs::path& remote_code_dir) {
  Result<std::vector<std::string>> regime_args = ImporterArgs(regime);
  if (!regime_args) return regime_args.error();
  const std::string python = EnvOr("HEADROOM_PYTHON", "python3");
  const std::string script = EnvOr("HEADROOM_IMPORTER", HEADROOM_IMPORTER_SCRIPT);
  // The kernel packages' versions too (kernel_paths.py names their distributions), found
  // where the importer finds them.
  Result<std::string> versions =
      InstalledPackageVersions(python, fs::path(script).parent_path(), regime.kernels, CacheDir());
  if (!versions) {
    return MakeError(
        fmt::format("importing this model needs {} with torch, transformers and peft installed{} "
                    "(bash scripts/setup.sh --torch): {}",
                    python, regime.kernels.empty() ? "" : ", and the kernel packages of --kernels",
                    versions.error().message));
  }
  uint64_t code = PythonFilesHash(fs::path(script).parent_path(), Fnv1a("headroom-import"));
  if (!remote_code_dir.empty())
    code = PythonFilesHash(remote_code_dir, Fnv1a("trust-remote-code", code));
  // The versions line with its newline, as the interpreter's output was hashed before the
  // answer was kept: graphs cached then keep their names.
  const uint64_t key =
      Fnv1a(fmt::format("{}|{}|{}", DescribeRegime(regime), regime.base_dtype, regime.min_seq_len),
            Fnv1a(*versions + "\n", Fnv1a(config_text, code)));
  const fs::path cached = CacheDir() / fmt::format("{:016x}.json", key);
  if (Result<std::string> text = ReadRegularFile(cached, kMaxGraphFileBytes)) {
    Result<ImportedGraph> graph = ParseImportedGraph(*text, cached.string());
    if (graph && graph->regime == regime) return std::move(*text);
  }
  if (auto e = CreateParentDirectories(cached)) return *e;
  // The importer reads the config from the cache: a Hub id's text may be in no file, and a
  // user's file may change while it runs.
  const fs::path config_copy = CacheDir() / fmt::format("{:016x}.config.json", Fnv1a(config_text));
  if (auto e = WriteFileAtomically(config_copy, std::string(config_text), AtSymlink::kReplace))
    return *e;
  const fs::path written = TemporaryNameBeside(cached);
  std::vector<std::string> argv = {python, script, config_copy.string(), "--out", written.string()};
  argv.insert(argv.end(), regime_args->begin(), regime_args->end());
  if (!remote_code_dir.empty())
    argv.insert(argv.end(), {"--trust-remote-code", remote_code_dir.string()});
  // Progress (the importer's lines, 10-60 s a regime) on a terminal only, as capacity's:
  // a script reading stderr gets the one-line error or nothing.
  const bool terminal = isatty(STDERR_FILENO) != 0;
  if (terminal)
    std::cerr << fmt::format(
        "headroom: importing the graph of {} from its transformers code ({})\n", config.string(),
        DescribeRegime(regime));
  Result<ProcessResult> run = RunProcess(argv, [terminal](std::string_view line) {
    if (terminal) std::cerr << "  " << line << "\n";
  });
  std::error_code ec;
  if (!run || run->exit_code != 0) {
    fs::remove(written, ec);
    return MakeError(
        run ? fmt::format("import failed (exit {}): {}", run->exit_code, run->last_error_line)
            : run.error().message);
  }
  Result<std::string> text = ReadRegularFile(written, kMaxGraphFileBytes);
  fs::remove(written, ec);
  if (!text) return text.error();
  Result<ImportedGraph> graph = ParseImportedGraph(*text, config.string() + " (imported)");
  if (!graph) return graph.error();
  if (auto e = WriteFileAtomically(cached, *text, AtSymlink::kReplace)) return *e;
  return std::move(*text);
}

Result<ImportedGraph> ImportGraph(const fs::path& config, std::string_view config_text,
                                  const TraceRegime& regime, const fs::path& remote_code_dir) {
  Result<std::string> text = ImportGraphText(config, config_text, regime, remote_code_dir);
  if (!text) return text.error();
  return ParseImportedGraph(*text, config.string() + " (imported)");
}

}  // namespace headroom
