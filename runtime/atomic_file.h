// Files that are either complete or absent: written to a temporary next to the target
// and renamed over it only once fully flushed, so a crash mid-write never leaves a
// half-written checkpoint where a resume would read it.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>

namespace headroom {

// Throws std::runtime_error naming the path when the write fails.
void WriteFileAtomically(const std::filesystem::path& path,
                         const std::function<void(std::ostream&)>& write);

}  // namespace headroom
