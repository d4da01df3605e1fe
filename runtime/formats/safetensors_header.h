// The header of a safetensors file (Hugging Face), parsed and checked without LibTorch:
// an 8-byte little-endian length, then a JSON object mapping each tensor name to its
// dtype, shape and byte range within the data section that follows, plus optional
// string metadata. Every entry is checked against the file before any data is used,
// so a truncated, inconsistent or hostile file is an error that names the tensor; this
// is the part of reading a checkpoint that sees untrusted bytes, and it is fuzzed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/result.h"

namespace headroom {

struct SafetensorsEntry {
  std::string dtype;  // the safetensors name: F32, BF16, I64, ...
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte range within the data section
};

struct SafetensorsHeader {
  int64_t data_start = 0;  // where the data section begins in the file
  std::map<std::string, SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
};

// Headers longer than this are not a header but a corrupt or foreign file.
inline constexpr int64_t kMaxSafetensorsHeaderBytes = int64_t{100} << 20;

// Bytes per element of the dtypes headroom reads; 0 for any other name.
int64_t SafetensorsElementSize(std::string_view dtype);

// The JSON header's length from the file's first 8 bytes; `where` names the file.
Result<int64_t> SafetensorsHeaderLength(std::string_view first_8_bytes, int64_t file_size,
                                        std::string_view where);
// Parses the JSON header (data_start = 8 + its length) against a file of `file_size`.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view json_text, int64_t file_size,
                                                 std::string_view where);
// Both steps over a whole file held in memory.
Result<SafetensorsHeader> ParseSafetensorsBytes(std::string_view file, std::string_view where);

}  // namespace headroom
