// Reading and writing the files users name. Reads take regular files only, up to a size
// limit, so a FIFO, device or directory is a clear error instead of a hang or an
// unbounded read. Writes are atomic and checked: the bytes go to a temporary file next
// to the target, which is renamed over it only once every write, the flush and the
// close succeeded; on any failure the temporary is removed and the previous file is
// left intact.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "planner/core/result.h"

namespace headroom {

// Text files: model specs, config.json, plan files.
inline constexpr int64_t kMaxTextFileBytes = int64_t{16} << 20;

// The whole file; the error names `path` and says what it is when it is not a file.
Result<std::string> ReadRegularFile(const std::filesystem::path& path,
                                    int64_t max_bytes = kMaxTextFileBytes);

// Error unless `path` is a regular file (for readers that stream large binary files).
std::optional<Error> CheckRegularFile(const std::filesystem::path& path);

// Error unless `path` is absent or a regular file (so a write never replaces a device)
// in a directory that exists.
std::optional<Error> CheckWritableTarget(const std::filesystem::path& path);

// Creates the directories above `path` (for outputs that are a directory of files).
std::optional<Error> CreateParentDirectories(const std::filesystem::path& path);

// `write` fills the stream; an exception from it removes the temporary and propagates.
std::optional<Error> WriteFileAtomically(const std::filesystem::path& path,
                                         const std::function<void(std::ostream&)>& write);
std::optional<Error> WriteFileAtomically(const std::filesystem::path& path,
                                         const std::string& text);

}  // namespace headroom
