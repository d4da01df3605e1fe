// FNV-1a over bytes: the names of files in headroom's caches (a key, not a checksum; what a
// cached file holds is checked on reading).
#pragma once

#include <cstdint>
#include <string_view>

namespace headroom {

inline uint64_t Fnv1a(std::string_view bytes, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace headroom
