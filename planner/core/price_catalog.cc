#include "planner/core/price_catalog.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "planner/core/gpu_catalog.h"
#include "planner/core/text_escape.h"
#include "planner/core/name_suggest.h"
#include "planner/core/text_escape.h"

namespace headroom {
namespace {

constexpr double kHoursPerYear = 8760;

// A user's text quoted in an error: one line, and short (a value can be a megabyte).
std::string PriceShown(std::string_view text, size_t longest = 40) {
  const std::string shown = TerminalEscaped(text.substr(0, longest));
  return text.size() > longest ? shown + "..." : shown;
}

// The file and the dotted field every error names, with the line the value is on. The
// field's last key can be one the file made up, so it is shown escaped.
class PriceFileError {
 public:
  explicit PriceFileError(const std::string& origin) : origin_(origin) {}
  Error operator()(std::string_view field, const YAML::Node& at, std::string_view what) const {
    return MakeError(fmt::format("{}: {} at line {}: {}", origin_, PriceShown(field, 80),
                                 at.Mark().line + 1, what));
  }

 private:
  const std::string& origin_;
};

std::string FieldIn(const std::string& where, std::string_view key) {
  return where.empty() ? std::string(key) : fmt::format("{}.{}", where, key);
}

const char* KindOf(const YAML::Node& node) {
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  if (node.IsNull()) return "empty";
  return "text";
}

// A map's entries in file order: each key's text, the key (for its line) and the value.
struct PriceMapEntry {
  std::string key;
  YAML::Node key_node, value;
};
using PriceEntries = std::vector<PriceMapEntry>;

// yaml-cpp keeps a key given twice but node[key] finds only one of them, so repeats are
// caught here by walking the map; so is any key outside `known`, with the closest known
// one. `noun` names what the keys are: "field" or "GPU".
Result<PriceEntries> PriceEntriesOf(const PriceFileError& error, const std::string& where,
                                    const YAML::Node& map, const std::vector<std::string>& known,
                                    std::string_view noun) {
  if (!map.IsMap()) return error(where, map, fmt::format("expected a map, got {}", KindOf(map)));
  PriceEntries entries;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar())
      return error(where, kv.first,
                   fmt::format("a key must be a {} name, got {}", noun, KindOf(kv.first)));
    const std::string key = kv.first.Scalar();
    const std::string field = FieldIn(where, key);
    // No name is long: a long key is no typo of one, and its edit distance costs its length.
    if (std::find(known.begin(), known.end(), key) == known.end())
      return error(field, kv.first,
                   fmt::format("unknown {} '{}'.{}", noun, PriceShown(key),
                               key.size() <= 64 ? DidYouMean(key, known) : ""));
    for (const PriceMapEntry& seen : entries)
      if (seen.key == key)
        return error(field, kv.first,
                     fmt::format("given twice (first at line {})", seen.key_node.Mark().line + 1));
    entries.push_back({key, kv.first, kv.second});
  }
  return entries;
}

const YAML::Node* PriceEntry(const PriceEntries& entries, std::string_view key) {
  for (const PriceMapEntry& e : entries)
    if (e.key == key) return &e.value;
  return nullptr;
}

// A whole YAML scalar as a number within [lo, hi]. Parsed here, not by yaml-cpp's
// as<double>, which throws on bad text and reads .inf and .nan as numbers.
Result<double> PriceNumber(const PriceFileError& error, const std::string& field,
                           const YAML::Node& node, double lo, double hi, std::string_view unit) {
  if (!node.IsScalar())
    return error(field, node, fmt::format("must be a number, got {}", KindOf(node)));
  const std::string& text = node.Scalar();
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);  // YAML allows it
  const std::string lower = AsciiLower(digits);
  const std::string_view unsigned_lower = std::string_view(lower).substr(lower.starts_with('-'));
  if (unsigned_lower == ".inf" || unsigned_lower == ".nan")
    return error(field, node, fmt::format("must be a finite number (got {})", PriceShown(text)));
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  const std::string range =
      fmt::format("must be between {:g} and {:g} {} (got {})", lo, hi, unit, PriceShown(text));
  // A number too large or too small for a double still reads to its end (out of range).
  if ((ec != std::errc() && ec != std::errc::result_out_of_range) ||
      end != digits.data() + digits.size() || digits.empty())
    return error(field, node, fmt::format("'{}' is not a number", PriceShown(text)));
  if (ec == std::errc::result_out_of_range) return error(field, node, range);
  if (!std::isfinite(value))
    return error(field, node, fmt::format("must be a finite number (got {})", PriceShown(text)));
  if (!(value >= lo && value <= hi)) return error(field, node, range);
  return value;
}

// A C0 or C1 control character or DEL (C1 as UTF-8: C2 80-C2 9F).
bool PriceTextHasControl(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) return true;
    if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9F) return true;
  }
  return false;
}

// Text that every output can carry: JSON cannot hold bytes that are not UTF-8 (nlohmann
// throws on them), and a newline or an escape sequence would forge lines of the report.
Result<std::string> PriceText(const PriceFileError& error, const std::string& field,
                              const YAML::Node& node) {
  if (!node.IsScalar())
    return error(field, node, fmt::format("must be text, got {}", KindOf(node)));
  if (!IsUtf8(node.Scalar())) return error(field, node, "must be UTF-8 text");
  if (PriceTextHasControl(node.Scalar()))
    return error(field, node, "must be one line of text, with no control characters");
  return node.Scalar();
}

Result<std::string> PriceDate(const PriceFileError& error, const std::string& field,
                              const YAML::Node& node) {
  auto text = PriceText(error, field, node);
  if (!text) return text;
  const bool shaped = text->size() == 10 && (*text)[4] == '-' && (*text)[7] == '-';
  if (!IsIsoDate(*text))
    return error(field, node,
                 shaped ? fmt::format("'{}' is not a calendar date (YYYY-MM-DD: month 01-12, "
                                      "day within the month)",
                                      PriceShown(*text))
                        : fmt::format("must be a date, YYYY-MM-DD (got '{}')", PriceShown(*text)));
  return text;
}

struct QuoteKind {
  const char* key;     // "cloud" or "purchase"
  const char* amount;  // its price field
  double lo, hi;
  const char* unit;
};

constexpr QuoteKind kQuoteKinds[] = {
    {"cloud", "usd_per_gpu_hour", price_limits::kMinUsdPerGpuHour, price_limits::kMaxUsdPerGpuHour,
     "US$ per GPU-hour"},
    {"purchase", "usd", price_limits::kMinPurchaseUsd, price_limits::kMaxPurchaseUsd,
     "US$ per GPU"},
};

Result<PriceQuote> ParseQuote(const PriceFileError& error, const std::string& where,
                              const YAML::Node& node, const QuoteKind& kind) {
  auto entries =
      PriceEntriesOf(error, where, node, {kind.amount, "provider", "source", "date"}, "field");
  if (!entries) return entries.error();
  PriceQuote q;
  const YAML::Node* amount = PriceEntry(*entries, kind.amount);
  if (!amount) return error(where, node, fmt::format("no {}", kind.amount));
  auto usd = PriceNumber(error, FieldIn(where, kind.amount), *amount, kind.lo, kind.hi, kind.unit);
  if (!usd) return usd.error();
  q.usd = *usd;
  for (auto [key, target] : {std::pair{"provider", &q.provider}, {"source", &q.source}}) {
    const YAML::Node* value = PriceEntry(*entries, key);
    if (!value) continue;
    auto text = PriceText(error, FieldIn(where, key), *value);
    if (!text) return text.error();
    *target = *text;
  }
  if (q.source.empty()) return error(where, node, "every price needs a source (where it was read)");
  const YAML::Node* date = PriceEntry(*entries, "date");
  if (!date) return error(where, node, "every price needs a date, YYYY-MM-DD");
  auto read = PriceDate(error, FieldIn(where, "date"), *date);
  if (!read) return read.error();
  q.date = *read;
  return q;
}

Result<GpuPrices> ParseGpuPrices(const PriceFileError& error, const std::string& where,
                                 const YAML::Node& node) {
  auto entries = PriceEntriesOf(error, where, node, {"cloud", "purchase"}, "field");
  if (!entries) return entries.error();
  GpuPrices prices;
  for (const QuoteKind& kind : kQuoteKinds) {
    const YAML::Node* value = PriceEntry(*entries, kind.key);
    if (!value) continue;
    auto quote = ParseQuote(error, FieldIn(where, kind.key), *value, kind);
    if (!quote) return quote.error();
    (std::string_view(kind.key) == "cloud" ? prices.cloud : prices.purchase) = *quote;
  }
  return prices;
}

Result<PriceCatalog> ParseRoot(const YAML::Node& root, const std::string& origin) {
  const PriceFileError error(origin);
  auto top = PriceEntriesOf(error, "", root, {"as_of", "owned", "gpus"}, "field");
  if (!top) return top.error();
  PriceCatalog c;
  c.origin = origin;
  const YAML::Node* as_of = PriceEntry(*top, "as_of");
  if (!as_of) return error("as_of", root, "missing: the file's date, YYYY-MM-DD");
  auto date = PriceDate(error, "as_of", *as_of);
  if (!date) return date.error();
  c.as_of = *date;
  if (const YAML::Node* owned = PriceEntry(*top, "owned")) {
    auto entries =
        PriceEntriesOf(error, "owned", *owned, {"lifetime_years", "utilization"}, "field");
    if (!entries) return entries.error();
    for (auto [key, target, lo, hi, unit] :
         {std::tuple{"lifetime_years", &c.lifetime_years, price_limits::kMinLifetimeYears,
                     price_limits::kMaxLifetimeYears, "years"},
          std::tuple{"utilization", &c.utilization, price_limits::kMinUtilization,
                     price_limits::kMaxUtilization, "(a fraction of the hours)"}}) {
      const YAML::Node* value = PriceEntry(*entries, key);
      if (!value) continue;
      auto number = PriceNumber(error, FieldIn("owned", key), *value, lo, hi, unit);
      if (!number) return number.error();
      *target = *number;
    }
  }
  const YAML::Node* gpus = PriceEntry(*top, "gpus");
  if (!gpus) return error("gpus", root, "missing: the map of prices per GPU");
  auto entries = PriceEntriesOf(error, "gpus", *gpus, GpuNames(), "GPU");
  if (!entries) return entries.error();
  for (const PriceMapEntry& gpu : *entries) {
    auto prices = ParseGpuPrices(error, gpu.key, gpu.value);
    if (!prices) return prices.error();
    c.gpus[gpu.key] = *prices;
  }
  return c;
}

}  // namespace

bool IsIsoDate(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  const auto number = [&](size_t at, size_t n) {
    int v = 0;
    for (size_t i = at; i < at + n; ++i) v = v * 10 + (s[i] - '0');
    return v;
  };
  const int year = number(0, 4), month = number(5, 2), day = number(8, 2);
  if (month < 1 || month > 12) return false;
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const int days = kDays[month - 1] + (month == 2 && leap ? 1 : 0);
  return day >= 1 && day <= days;
}

const PriceQuote* PriceCatalog::QuoteFor(const std::string& gpu, PriceBasis basis) const {
  auto it = gpus.find(gpu);
  if (it == gpus.end()) return nullptr;
  const std::optional<PriceQuote>& q =
      basis == PriceBasis::kCloud ? it->second.cloud : it->second.purchase;
  return q ? &*q : nullptr;
}

std::optional<double> PriceCatalog::UsdPerGpuHour(const std::string& gpu, PriceBasis basis) const {
  const PriceQuote* q = QuoteFor(gpu, basis);
  if (!q) return std::nullopt;
  if (basis == PriceBasis::kCloud) return q->usd;
  return q->usd / (lifetime_years * kHoursPerYear * utilization);
}

Result<PriceCatalog> ParsePriceCatalog(std::string_view yaml_text, const std::string& origin) {
  // Every value is read as a scalar's text, so only the parse itself can throw.
  try {
    const YAML::Node root = YAML::Load(std::string(yaml_text));
    if (!root.IsMap())
      return MakeError(fmt::format("{}: expected as_of and a 'gpus' map of prices", origin));
    return ParseRoot(root, origin);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's message can quote the character it stopped at: a line break, say.
    return MakeError(fmt::format("{}: malformed YAML at line {}: {}", origin, e.mark.line + 1,
                                 TerminalEscaped(e.msg)));
  }
}

const PriceCatalog& BuiltInPrices() {
  static const PriceCatalog prices = [] {
    auto parsed = ParsePriceCatalog(PriceCatalogFiles()[0].text, "built-in");
    if (!parsed) throw std::logic_error("built-in price file: " + parsed.error().message);
    return *parsed;
  }();
  return prices;
}

}  // namespace headroom
