#include "planner/core/number_parse.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include <fmt/format.h>

#include "planner/core/limits.h"

namespace headroom {

namespace {

// The whole text as one T; `kind` names what it must be ("an integer", "a number").
template <typename T>
Result<T> ParseWhole(std::string_view text, T lo, T hi, std::string_view what,
                     std::string_view kind) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range)
    return MakeError(fmt::format("{} must be between {} and {} (got {})", what, lo, hi, text));
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return MakeError(fmt::format("{}: '{}' is not {}", what, text, kind));
  return value;
}

}  // namespace

Result<int64_t> ParseInteger(std::string_view text, int64_t lo, int64_t hi, std::string_view what) {
  Result<int64_t> value = ParseWhole(text, lo, hi, what, "an integer");
  if (!value) return value;
  if (auto error = limits::CheckRange(*value, lo, hi, what)) return *error;
  return value;
}

Result<double> ParseReal(std::string_view text, double lo, double hi, std::string_view what) {
  Result<double> value = ParseWhole(text, lo, hi, what, "a number");
  if (!value) return value;
  if (!std::isfinite(*value))
    return MakeError(fmt::format("{} must be a finite number (got {})", what, text));
  if (*value < lo || *value > hi)
    return MakeError(fmt::format("{} must be between {} and {} (got {})", what, lo, hi, text));
  return value;
}

}  // namespace headroom
