#include "planner/core/number_parse.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include <fmt/format.h>

#include "planner/core/limits.h"

namespace headroom {

Result<int64_t> ParseInteger(std::string_view text, int64_t lo, int64_t hi, std::string_view what) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range)
    return MakeError(fmt::format("{} must be between {} and {} (got {})", what, lo, hi, text));
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return MakeError(fmt::format("{}: '{}' is not an integer", what, text));
  if (auto error = limits::CheckRange(value, lo, hi, what)) return *error;
  return value;
}

Result<double> ParseReal(std::string_view text, double lo, double hi, std::string_view what) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range)
    return MakeError(fmt::format("{} must be between {} and {} (got {})", what, lo, hi, text));
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return MakeError(fmt::format("{}: '{}' is not a number", what, text));
  if (!std::isfinite(value))
    return MakeError(fmt::format("{} must be a finite number (got {})", what, text));
  if (value < lo || value > hi)
    return MakeError(fmt::format("{} must be between {} and {} (got {})", what, lo, hi, text));
  return value;
}

}  // namespace headroom
