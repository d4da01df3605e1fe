#include "models/hub_cache.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <unistd.h>

#include <fmt/format.h>

#include "planner/core/file_io.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRevision = "main";

// huggingface_hub's REGEX_COMMIT_HASH: ^[0-9a-f]{40}$.
bool IsCommitHash(std::string_view s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// A name the cache may use as one path component: a ref's content or an ETag.
bool IsSafeComponent(std::string_view s) {
  return !s.empty() && s.size() <= 128 && s != "." && s != ".." &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) {
           return std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-';
         });
}

// The revision `main` names: the commit in refs/main, else `main` itself (a snapshot
// stored without a commit). nullopt when the ref cannot be used.
std::optional<std::string> ResolveMain(const fs::path& repo) {
  const fs::path ref = repo / "refs" / kRevision;
  std::error_code ec;
  if (!fs::is_regular_file(ref, ec)) return std::string(kRevision);
  Result<std::string> text = ReadRegularFile(ref, 256);
  if (!text) return std::nullopt;
  std::string commit = *text;
  // huggingface_hub writes no newline; one added by hand is harmless.
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back())))
    commit.pop_back();
  if (!IsSafeComponent(commit)) return std::nullopt;
  return commit;
}

// `link` -> `target`, replacing whatever `link` was, by renaming a new link over it. The
// new link is made under an unpredictable name; symlink(2) never follows or replaces
// what is already at a name.
std::optional<Error> ReplaceWithSymlink(const fs::path& target, const fs::path& link) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    const fs::path tmp = TemporaryNameBeside(link);
    if (::symlink(target.c_str(), tmp.c_str()) != 0) {
      if (errno == EEXIST) continue;
      break;
    }
    if (::rename(tmp.c_str(), link.c_str()) == 0) return std::nullopt;
    const int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    break;
  }
  return MakeError(fmt::format("cannot link {}: {}", link.string(), std::strerror(errno)));
}

}  // namespace

std::string HubRepoFolderName(std::string_view repo_id) {
  std::string name = "models--";
  for (const char c : repo_id) {
    if (c == '/')
      name += "--";
    else
      name += c;
  }
  return name;
}

std::optional<fs::path> FindInHubCache(const fs::path& cache, std::string_view repo_id,
                                       std::string_view filename) {
  const fs::path repo = cache / HubRepoFolderName(repo_id);
  std::error_code ec;
  if (!fs::is_directory(repo, ec)) return std::nullopt;
  const std::optional<std::string> revision = ResolveMain(repo);
  if (!revision) return std::nullopt;
  const fs::path file = repo / "snapshots" / *revision / filename;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;  // follows the link to the blob
  return file;
}

std::optional<Error> StoreInHubCache(const fs::path& cache, std::string_view repo_id,
                                     std::string_view filename, const std::string& text,
                                     const HubFileVersion& version) {
  const fs::path repo = cache / HubRepoFolderName(repo_id);
  const bool has_commit = IsCommitHash(version.commit);
  const fs::path snapshot =
      repo / "snapshots" / (has_commit ? version.commit : std::string(kRevision));
  std::error_code ec;
  fs::create_directories(snapshot, ec);
  if (ec) return MakeError(fmt::format("cannot create {}: {}", snapshot.string(), ec.message()));
  const fs::path pointer = snapshot / filename;

  // Step 1. The bytes: a blob named by its ETag with the snapshot's file a relative link
  // to it, as huggingface_hub stores them; the file itself where that cannot be.
  bool linked = false;
  if (IsSafeComponent(version.etag)) {
    fs::create_directories(repo / "blobs", ec);
    const fs::path blob = repo / "blobs" / version.etag;
    linked = !ec && !WriteFileAtomically(blob, text, AtSymlink::kReplace) &&
             !ReplaceWithSymlink(fs::path("../../blobs") / version.etag, pointer);
  }
  if (!linked) {
    if (auto error = WriteFileAtomically(pointer, text, AtSymlink::kReplace)) return error;
  }
  // Step 2. The ref, last: it names the snapshot only once the snapshot is complete. A
  // snapshot named `main` is found only with no ref naming another.
  if (!has_commit) {
    fs::remove(repo / "refs" / kRevision, ec);
    return std::nullopt;
  }
  fs::create_directories(repo / "refs", ec);
  if (ec)
    return MakeError(fmt::format("cannot create {}: {}", (repo / "refs").string(), ec.message()));
  return WriteFileAtomically(repo / "refs" / kRevision, version.commit, AtSymlink::kReplace);
}

}  // namespace headroom
