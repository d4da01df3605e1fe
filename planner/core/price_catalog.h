// What a GPU-hour costs, for `headroom capacity`: a dated price file
// (planner/core/catalog/prices.yaml, or --prices FILE) in which every price carries its
// source and the date it was read. Cloud prices are per GPU-hour; purchase prices become
// per GPU-hour over a stated lifetime and utilization.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "planner/core/embedded_file.h"
#include "planner/core/result.h"

namespace headroom {

std::span<const EmbeddedFile> PriceCatalogFiles();  // generated at build time

enum class PriceBasis {
  kCloud,  // renting: on-demand $/GPU-hour
  kOwned,  // buying: the purchase price spread over the hours the GPU is used
};

struct PriceQuote {
  double usd = 0;        // per GPU-hour (cloud) or per GPU (purchase)
  std::string provider;  // who charges it: "Lambda on-demand", "list price"
  std::string source;    // where it was read (a URL)
  std::string date;      // when it was read, YYYY-MM-DD
};

struct GpuPrices {
  std::optional<PriceQuote> cloud;
  std::optional<PriceQuote> purchase;
};

struct PriceCatalog {
  std::string as_of;   // the file's date: when its prices were last checked
  std::string origin;  // "built-in" or the file's path
  // How a purchase becomes an hourly price: usd / (lifetime_years x 8760 x utilization).
  double lifetime_years = 4;
  double utilization = 0.6;
  std::map<std::string, GpuPrices> gpus;

  // The quote a basis prices `gpu` from, and the hourly price it gives; none when the
  // file has no such price for it.
  const PriceQuote* QuoteFor(const std::string& gpu, PriceBasis basis) const;
  std::optional<double> UsdPerGpuHour(const std::string& gpu, PriceBasis basis) const;
};

// What a price file may hold. A value outside these is a typo or a unit slip (cents for
// dollars, a cluster's price for one GPU's), and an infinite or zero price would make
// every cost in the report meaningless, so it is refused rather than used.
namespace price_limits {
inline constexpr double kMinUsdPerGpuHour = 0.001;  // cloud.usd_per_gpu_hour
inline constexpr double kMaxUsdPerGpuHour = 10000;
inline constexpr double kMinPurchaseUsd = 1;  // purchase.usd, per GPU
inline constexpr double kMaxPurchaseUsd = 1e8;
inline constexpr double kMinLifetimeYears = 0.1;  // owned.lifetime_years
inline constexpr double kMaxLifetimeYears = 50;
inline constexpr double kMinUtilization = 0.01;  // owned.utilization
inline constexpr double kMaxUtilization = 1;
}  // namespace price_limits

// A real calendar date written YYYY-MM-DD: month 01-12, day within the month (leap years
// by the Gregorian rule).
bool IsIsoDate(std::string_view text);

// Every price must name its source and a real date, and every number must be finite and
// within price_limits. Refused too: a GPU not in the GPU catalog, an unknown key, a key
// given twice (YAML would keep one silently), a map or list where a value belongs. Each
// error is one line naming the file, the field (h100-80gb.cloud.usd_per_gpu_hour) and its
// line.
Result<PriceCatalog> ParsePriceCatalog(std::string_view yaml_text, const std::string& origin);
// The file shipped in the binary.
const PriceCatalog& BuiltInPrices();

}  // namespace headroom
