// Parsing and printing byte counts the way users write them ("24GiB", "80GB", "512MiB").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "planner/core/result.h"

namespace headroom {

// Accepts an integer or decimal number with an optional unit: B, KB/MB/GB/TB (powers
// of 1000), KiB/MiB/GiB/TiB (powers of 1024). Case-insensitive; bare numbers are bytes.
Result<int64_t> ParseBytes(std::string_view text);

// Human-readable, binary units with two decimals: "13.48 GiB".
std::string FormatBytes(int64_t bytes);

}  // namespace headroom
