#include "planner/core/price_catalog.h"

#include <cctype>
#include <stdexcept>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace headroom {
namespace {

constexpr double kHoursPerYear = 8760;

bool IsIsoDate(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

Result<PriceQuote> ParseQuote(const YAML::Node& node, const std::string& where,
                              const char* amount_key) {
  if (!node.IsMap()) return MakeError(fmt::format("{}: expected a map", where));
  PriceQuote q;
  if (!node[amount_key]) return MakeError(fmt::format("{}: no {}", where, amount_key));
  q.usd = node[amount_key].as<double>();
  if (!(q.usd > 0)) return MakeError(fmt::format("{}: {} must be positive", where, amount_key));
  q.provider = node["provider"] ? node["provider"].as<std::string>() : "";
  q.source = node["source"] ? node["source"].as<std::string>() : "";
  q.date = node["date"] ? node["date"].as<std::string>() : "";
  if (q.source.empty())
    return MakeError(fmt::format("{}: every price needs a source (where it was read)", where));
  if (!IsIsoDate(q.date))
    return MakeError(
        fmt::format("{}: every price needs a date, YYYY-MM-DD (got '{}')", where, q.date));
  return q;
}

Result<PriceCatalog> ParseRoot(const YAML::Node& root, const std::string& origin) {
  PriceCatalog c;
  c.origin = origin;
  c.as_of = root["as_of"] ? root["as_of"].as<std::string>() : "";
  if (!IsIsoDate(c.as_of))
    return MakeError(fmt::format("{}: as_of must be the file's date, YYYY-MM-DD", origin));
  if (const YAML::Node owned = root["owned"]) {
    c.lifetime_years = owned["lifetime_years"].as<double>(c.lifetime_years);
    c.utilization = owned["utilization"].as<double>(c.utilization);
  }
  if (!(c.lifetime_years > 0) || !(c.utilization > 0 && c.utilization <= 1))
    return MakeError(fmt::format(
        "{}: owned.lifetime_years must be positive and owned.utilization in (0, 1]", origin));
  for (const auto& entry : root["gpus"]) {
    const std::string gpu = entry.first.as<std::string>();
    GpuPrices prices;
    for (auto [key, slot, amount] : {std::tuple{"cloud", &prices.cloud, "usd_per_gpu_hour"},
                                     std::tuple{"purchase", &prices.purchase, "usd"}}) {
      if (!entry.second[key]) continue;
      auto quote =
          ParseQuote(entry.second[key], fmt::format("{}: {}.{}", origin, gpu, key), amount);
      if (!quote) return quote.error();
      *slot = *quote;
    }
    c.gpus[gpu] = prices;
  }
  return c;
}

}  // namespace

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
  try {
    const YAML::Node root = YAML::Load(std::string(yaml_text));
    if (!root.IsMap() || !root["gpus"] || !root["gpus"].IsMap())
      return MakeError(fmt::format("{}: expected as_of and a 'gpus' map of prices", origin));
    return ParseRoot(root, origin);
  } catch (const YAML::Exception& e) {
    return MakeError(fmt::format("{}: {}", origin, e.what()));
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
