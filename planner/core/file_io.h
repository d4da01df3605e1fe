// Reading and writing the files users name. Reads take regular files only, up to a size
// limit, so a FIFO, device or directory is a clear error instead of a hang or an
// unbounded read. Writes go where the path leads and nowhere else:
//   - a regular file (or none yet) is replaced atomically: the bytes go to a temporary
//     created exclusively, under an unpredictable name, next to the file, which is
//     renamed over it only once every write, the flush and the close succeeded; on any
//     failure the temporary is removed and the previous file is left intact;
//   - a symlink is written through to its target (the link stays a link);
//   - anything else that takes writes (a character device, a FIFO, a descriptor named
//     /proc/self/fd/N or /dev/stdout, and "-" for stdout) is written directly, appended
//     to, with no temporary and no rename: renaming over it would replace a device or a
//     link the system needs.
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

// Error unless a write to `path` can go ahead: a regular file or none in a directory that
// exists, or something else that takes writes (see above); never a directory.
std::optional<Error> CheckWritableTarget(const std::filesystem::path& path);

// How a write treats a symlink at the path: user outputs are written through it; the
// files a program keeps for itself (a cache) are replaced whatever sits at their name,
// so a link planted there cannot redirect the write.
enum class AtSymlink { kWriteThrough, kReplace };

// Creates the directories above `path` (for outputs that are a directory of files).
std::optional<Error> CreateParentDirectories(const std::filesystem::path& path);

// `write` fills the stream; an exception from it removes the temporary and propagates.
std::optional<Error> WriteFileAtomically(const std::filesystem::path& path,
                                         const std::function<void(std::ostream&)>& write,
                                         AtSymlink at_symlink = AtSymlink::kWriteThrough);
std::optional<Error> WriteFileAtomically(const std::filesystem::path& path, const std::string& text,
                                         AtSymlink at_symlink = AtSymlink::kWriteThrough);

// A name for a temporary beside `target` that nobody can guess: `.NAME.tmp-` and 64 bits
// from the system's random source, NAME cut so the whole stays within NAME_MAX. Create
// it exclusively (O_EXCL, or symlink(2)) all the same.
std::filesystem::path TemporaryNameBeside(const std::filesystem::path& target);

}  // namespace headroom
