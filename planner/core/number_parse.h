// Strict parsing of the numbers users type into flags and files: the whole text must be
// one number within [lo, hi]. Trailing text, NaN, Inf and values that do not fit are
// errors naming `what` (the flag or field), never clamped or wrapped.
#pragma once

#include <cstdint>
#include <string_view>

#include "planner/core/result.h"

namespace headroom {

Result<int64_t> ParseInteger(std::string_view text, int64_t lo, int64_t hi, std::string_view what);
Result<double> ParseReal(std::string_view text, double lo, double hi, std::string_view what);

}  // namespace headroom
