#include "planner/core/byte_units.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace headroom {

Result<int64_t> ParseBytes(std::string_view text) {
  std::string s(text);
  size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.'))
    ++pos;
  if (pos == 0) return MakeError(fmt::format("'{}' is not a size; write e.g. 24GiB or 80GB", text));
  double number = std::strtod(s.substr(0, pos).c_str(), nullptr);
  std::string unit;
  for (size_t i = pos; i < s.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(s[i])))
      unit += static_cast<char>(std::tolower(s[i]));
  }
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "gb")
    scale = 1e9;
  else if (unit == "tb")
    scale = 1e12;
  else if (unit == "kib")
    scale = 1024.0;
  else if (unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return MakeError(
        fmt::format("unknown size unit '{}' in '{}'; use B, MB, GB, MiB or GiB", unit, text));
  double bytes = number * scale;
  if (!(bytes > 0)) return MakeError(fmt::format("size '{}' must be greater than zero", text));
  return static_cast<int64_t>(std::llround(bytes));
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
