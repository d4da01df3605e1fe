#include "planner/core/byte_units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <iterator>
#include <system_error>
#include <utility>

#include <fmt/format.h>

namespace headroom {

Result<int64_t> ParseBytes(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'))
    ++pos;
  double number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + pos, number);
  if (pos == 0 || ec != std::errc() || end != text.data() + pos)
    return MakeError(fmt::format("'{}' is not a size; write e.g. 24GiB or 80GB", text));
  std::string unit;
  for (size_t i = pos; i < text.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(text[i])))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  }
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"", 1},      {"b", 1},        {"kb", 1e3},     {"mb", 1e6},     {"gb", 1e9},
      {"tb", 1e12}, {"kib", 0x1p10}, {"mib", 0x1p20}, {"gib", 0x1p30}, {"tib", 0x1p40},
  };
  const auto* found = std::find_if(std::begin(kUnits), std::end(kUnits),
                                   [&](const auto& u) { return unit == u.first; });
  if (found == std::end(kUnits))
    return MakeError(
        fmt::format("unknown size unit '{}' in '{}'; use B, MB, GB, MiB or GiB", unit, text));
  const double bytes = std::round(number * found->second);
  if (!(bytes >= 1)) return MakeError(fmt::format("size '{}' must come to at least 1 byte", text));
  if (!(bytes < 0x1p63))
    return MakeError(fmt::format("size '{}' does not fit in 64 bits (at most 8 EiB)", text));
  return static_cast<int64_t>(bytes);
}

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double a = std::fabs(b);
  if (a >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (a >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (a >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace headroom
