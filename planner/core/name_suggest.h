// "Did you mean ...?" for unknown names: the catalog entries closest in edit distance.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace headroom {

// `s` with ASCII letters lowered (names are matched case-insensitively).
std::string AsciiLower(std::string_view s);

// Up to `limit` candidates within a small edit distance of `name` (case-insensitive),
// closest first; also candidates that contain `name` as a substring.
std::vector<std::string> ClosestNames(std::string_view name,
                                      const std::vector<std::string>& candidates, size_t limit = 3);

// " Did you mean: a, b?" or an empty string, ready to append to an error message.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace headroom
