#include "planner/core/name_suggest.h"

#include <algorithm>
#include <cctype>

namespace headroom {

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> ClosestNames(std::string_view name,
                                      const std::vector<std::string>& candidates, size_t limit) {
  const std::string needle = AsciiLower(name);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& c : candidates) {
    const std::string lc = AsciiLower(c);
    size_t d = EditDistance(needle, lc);
    if (!needle.empty() && lc.find(needle) != std::string::npos) d = std::min<size_t>(d, 1);
    if (d <= std::max<size_t>(2, needle.size() / 3)) scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < limit; ++i) out.push_back(scored[i].second);
  return out;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates) {
  std::vector<std::string> close = ClosestNames(name, candidates);
  if (close.empty()) return "";
  std::string out = " Did you mean: ";
  for (size_t i = 0; i < close.size(); ++i) out += (i ? ", " : "") + close[i];
  return out + "?";
}

}  // namespace headroom
