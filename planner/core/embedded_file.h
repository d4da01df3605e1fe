// A text file compiled into the binary (the model and GPU catalogs), so the tool works
// from any directory without an install step.
#pragma once

#include <span>
#include <string_view>

namespace headroom {

struct EmbeddedFile {
  std::string_view name;  // file name without extension, e.g. "llama-2-7b"
  std::string_view text;
};

}  // namespace headroom
