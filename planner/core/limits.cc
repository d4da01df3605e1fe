#include "planner/core/limits.h"

#include <fmt/format.h>

namespace headroom::limits {

std::optional<Error> CheckRange(int64_t value, int64_t lo, int64_t hi, std::string_view what) {
  if (value >= lo && value <= hi) return std::nullopt;
  if (value < lo && lo == 1)
    return MakeError(fmt::format("{} must be a positive integer (got {})", what, value));
  return MakeError(fmt::format("{} must be between {} and {} (got {})", what, lo, hi, value));
}

}  // namespace headroom::limits
