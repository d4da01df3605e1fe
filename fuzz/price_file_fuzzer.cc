// The price file (`capacity --prices FILE`): any text either fails with a one-line error
// or gives prices that keep price_catalog.h's promises (catalog GPUs, finite prices within
// price_limits, real dates, a source for each); and a report priced from them, on either
// basis, renders as text, JSON, CSV and HTML with the chart bounded.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "planner/core/gpu_catalog.h"
#include "planner/core/price_catalog.h"
#include "planner/plan/capacity_sweep.h"
#include "planner/report/capacity_html.h"
#include "planner/report/capacity_report.h"

namespace {

using namespace headroom;

bool Within(double v, double lo, double hi) { return v >= lo && v <= hi; }

void CheckQuote(const PriceQuote& q, double lo, double hi) {
  fuzz::Require(Within(q.usd, lo, hi), "a price within price_limits");
  fuzz::Require(!q.source.empty(), "a price names its source");
  fuzz::Require(IsIsoDate(q.date), "a price's date is a real date");
}

// Rows as a sweep makes them: a few GPU types of the file at a few counts, fixed hours,
// cost = hours x GPUs x the file's hourly price; one type the file may not price.
CapacityReport ReportOf(const PriceCatalog& prices, PriceBasis basis) {
  CapacityReport report;
  report.job = {.tokens = 1e9, .basis = basis};
  std::vector<std::string> types;
  for (const auto& [gpu, p] : prices.gpus)
    if (types.size() < 3) types.push_back(gpu);
  if (std::find(types.begin(), types.end(), "t4") == types.end()) types.push_back("t4");
  for (const std::string& gpu : types) {
    for (int64_t count : {1, 2, 8, 64}) {
      CapacityRow r;
      r.gpu = gpu;
      r.gpus = count;
      r.solved = r.fits = true;
      r.usable_bytes = r.peak_device_bytes = int64_t{80} << 30;
      r.time.tokens_per_second = 1e4 * static_cast<double>(count);
      r.hours = *JobHours(report.job.tokens, r.time.tokens_per_second);
      r.cost_usd = JobCost(r.hours, count, prices.UsdPerGpuHour(gpu, basis));
      if (const std::optional<double> hourly = prices.UsdPerGpuHour(gpu, basis)) {
        fuzz::Require(*hourly > 0 && std::isfinite(*hourly), "an hourly price is finite");
        fuzz::Require(r.known_cost().has_value(), "a priced row has a finite cost");
      }
      report.rows.push_back(r);
    }
  }
  FindAnswers(report);
  return report;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Result<PriceCatalog> prices = ParsePriceCatalog(fuzz::AsText(data, size), "prices.yaml");
  if (!prices) {
    fuzz::Require(prices.error().message.find('\n') == std::string::npos, "an error is one line");
    return 0;
  }
  fuzz::Require(IsIsoDate(prices->as_of), "as_of is a real date");
  fuzz::Require(Within(prices->lifetime_years, price_limits::kMinLifetimeYears,
                       price_limits::kMaxLifetimeYears),
                "lifetime_years within price_limits");
  fuzz::Require(
      Within(prices->utilization, price_limits::kMinUtilization, price_limits::kMaxUtilization),
      "utilization within price_limits");
  for (const auto& [gpu, p] : prices->gpus) {
    fuzz::Require(FindGpu(gpu).ok(), "a priced GPU is in the catalog");
    if (p.cloud)
      CheckQuote(*p.cloud, price_limits::kMinUsdPerGpuHour, price_limits::kMaxUsdPerGpuHour);
    if (p.purchase)
      CheckQuote(*p.purchase, price_limits::kMinPurchaseUsd, price_limits::kMaxPurchaseUsd);
  }
  const CapacitySubject subject{.model = "m", .training = "t"};
  for (PriceBasis basis : {PriceBasis::kCloud, PriceBasis::kOwned}) {
    const CapacityReport report = ReportOf(*prices, basis);
    // The page holds the file's strings a few times over; the chart and table are fixed.
    const std::string html = CapacityHtml(subject, report, *prices);
    fuzz::Require(html.size() < (size_t{1} << 20) + 4 * size, "the HTML report is bounded");
    const std::string text = FormatCapacityText(subject, report, *prices);
    fuzz::Require(text.find("$inf") == std::string::npos, "no infinite cost in the text");
    const std::string json = CapacityJson(subject, report, *prices).dump();
    fuzz::Require(!json.empty(), "the JSON dumps");
    fuzz::Require(!CapacityCsv(report).empty(), "the CSV renders");
  }
  return 0;
}
