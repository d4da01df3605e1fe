#include "runtime/formats/safetensors_header.h"

#include <cstdint>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace headroom {
namespace {

constexpr std::pair<std::string_view, int64_t> kElementSizes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
    {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1},
};

// Checks one tensor's entry; the error says what is wrong with it.
Result<SafetensorsEntry> ParseEntry(const nlohmann::json& value, int64_t data_size) {
  if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
      !value.contains("data_offsets") || !value["dtype"].is_string() ||
      !value["shape"].is_array() || !value["data_offsets"].is_array() ||
      value["data_offsets"].size() != 2)
    return MakeError("has a malformed header entry");
  SafetensorsEntry e;
  e.dtype = value["dtype"].get<std::string>();
  const int64_t element_size = SafetensorsElementSize(e.dtype);
  if (element_size == 0)
    return MakeError(fmt::format("has dtype {}, which headroom does not read", e.dtype));
  int64_t bytes = element_size;  // saturates: a zero dimension later still makes it 0
  for (const auto& d : value["shape"]) {
    const bool fits = d.is_number_integer() &&
                      !(d.is_number_unsigned() && d.get<uint64_t>() > uint64_t{INT64_MAX});
    if (!fits || d.get<int64_t>() < 0) return MakeError("has a malformed shape");
    e.shape.push_back(d.get<int64_t>());
    int64_t next = 0;
    bytes = __builtin_mul_overflow(bytes, e.shape.back(), &next) ? INT64_MAX : next;
  }
  for (const auto& offset : value["data_offsets"]) {
    if (!offset.is_number_unsigned() || offset.get<uint64_t>() > uint64_t(data_size))
      return MakeError(
          fmt::format("has data offsets {} outside the {} data bytes of the file "
                      "(truncated?)",
                      value["data_offsets"].dump(), data_size));
  }
  e.begin = value["data_offsets"][0].get<int64_t>();
  e.end = value["data_offsets"][1].get<int64_t>();
  if (e.end < e.begin || e.end - e.begin != bytes)
    return MakeError(fmt::format("has byte range [{}, {}), which does not hold its shape and dtype",
                                 e.begin, e.end));
  return e;
}

}  // namespace

int64_t SafetensorsElementSize(std::string_view dtype) {
  for (const auto& [name, size] : kElementSizes)
    if (name == dtype) return size;
  return 0;
}

Result<int64_t> SafetensorsHeaderLength(std::string_view first_8_bytes, int64_t file_size,
                                        std::string_view where) {
  if (first_8_bytes.size() < 8)
    return MakeError(
        fmt::format("{}: not a safetensors file (shorter than its 8-byte header length)", where));
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | static_cast<unsigned char>(first_8_bytes[i]);
  if (length > uint64_t{kMaxSafetensorsHeaderBytes} || static_cast<int64_t>(8 + length) > file_size)
    return MakeError(
        fmt::format("{}: not a safetensors file or truncated (header of {} bytes in a file of {})",
                    where, length, file_size));
  return static_cast<int64_t>(length);
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view json_text, int64_t file_size,
                                                 std::string_view where) {
  SafetensorsHeader h;
  h.data_start = 8 + static_cast<int64_t>(json_text.size());
  const int64_t data_size = file_size - h.data_start;
  if (data_size < 0) return MakeError(fmt::format("{}: truncated safetensors file", where));
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return MakeError(fmt::format("{}: the header is not a JSON object", where));
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      if (value.is_object())
        for (const auto& [k, v] : value.items())
          if (v.is_string()) h.metadata[k] = v.get<std::string>();
      continue;
    }
    Result<SafetensorsEntry> entry = ParseEntry(value, data_size);
    if (!entry)
      return MakeError(fmt::format("{}: tensor '{}' {}", where, name, entry.error().message));
    h.entries.emplace(name, std::move(*entry));
  }
  return h;
}

Result<SafetensorsHeader> ParseSafetensorsBytes(std::string_view file, std::string_view where) {
  const auto size = static_cast<int64_t>(file.size());
  Result<int64_t> length = SafetensorsHeaderLength(file.substr(0, 8), size, where);
  if (!length) return length.error();
  return ParseSafetensorsHeader(file.substr(8, static_cast<size_t>(*length)), size, where);
}

}  // namespace headroom
