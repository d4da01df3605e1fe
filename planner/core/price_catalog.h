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

// Every price must name its source and date, and every date must read YYYY-MM-DD.
Result<PriceCatalog> ParsePriceCatalog(std::string_view yaml_text, const std::string& origin);
// The file shipped in the binary.
const PriceCatalog& BuiltInPrices();

}  // namespace headroom
