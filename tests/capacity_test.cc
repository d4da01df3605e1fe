// The pieces of `headroom capacity` that need no sweep: the price file's rules and the
// answers drawn from a table of configurations.
#include <gtest/gtest.h>

#include "planner/core/gpu_catalog.h"
#include "planner/core/price_catalog.h"
#include "planner/plan/capacity_sweep.h"
#include "planner/report/capacity_report.h"

namespace headroom {
namespace {

constexpr const char* kPrices = R"(
as_of: 2026-11-30
owned: {lifetime_years: 5, utilization: 0.5}
gpus:
  h100-80gb:
    cloud: {usd_per_gpu_hour: 4.0, provider: X, source: "https://x", date: 2026-11-01}
    purchase: {usd: 21900, provider: Y, source: "https://y", date: 2026-10-01}
)";

TEST(PriceCatalog, CloudIsPerHourAndOwnedIsAmortized) {
  auto prices = ParsePriceCatalog(kPrices, "test");
  ASSERT_TRUE(prices) << prices.error().message;
  EXPECT_EQ(prices->as_of, "2026-11-30");
  EXPECT_DOUBLE_EQ(*prices->UsdPerGpuHour("h100-80gb", PriceBasis::kCloud), 4.0);
  // 21900 / (5 years x 8760 h x 0.5) = 1.0 per hour.
  EXPECT_DOUBLE_EQ(*prices->UsdPerGpuHour("h100-80gb", PriceBasis::kOwned), 1.0);
  EXPECT_FALSE(prices->UsdPerGpuHour("a100-80gb", PriceBasis::kCloud));
}

TEST(PriceCatalog, EveryPriceNeedsASourceAndADate) {
  auto no_source = ParsePriceCatalog(R"(
as_of: 2026-11-30
gpus:
  l4: {cloud: {usd_per_gpu_hour: 1, date: 2026-01-01}}
)",
                                     "f.yaml");
  ASSERT_FALSE(no_source);
  EXPECT_NE(no_source.error().message.find("l4.cloud"), std::string::npos);
  EXPECT_NE(no_source.error().message.find("source"), std::string::npos);
  auto bad_date = ParsePriceCatalog(R"(
as_of: 2026-11-30
gpus:
  l4: {cloud: {usd_per_gpu_hour: 1, source: s, date: last week}}
)",
                                    "f.yaml");
  ASSERT_FALSE(bad_date);
  EXPECT_NE(bad_date.error().message.find("YYYY-MM-DD"), std::string::npos);
  EXPECT_FALSE(ParsePriceCatalog("gpus: {}", "f.yaml"));  // no as_of
}

// The shipped file: a price for every catalog GPU a buyer can rent or buy, each quote
// parsed with its source and date (the parser refuses any without).
TEST(PriceCatalog, BuiltInPricesMostOfTheCatalog) {
  const PriceCatalog& prices = BuiltInPrices();
  int priced = 0;
  for (const std::string& gpu : GpuNames())
    priced += prices.QuoteFor(gpu, PriceBasis::kCloud) != nullptr;
  EXPECT_GE(priced, static_cast<int>(GpuNames().size()) - 2);
  EXPECT_TRUE(prices.QuoteFor("b200", PriceBasis::kCloud));
  EXPECT_TRUE(prices.QuoteFor("h100-pcie", PriceBasis::kCloud));
}

CapacityRow Row(const char* gpu, int64_t n, double hours, std::optional<double> cost) {
  CapacityRow r;
  r.gpu = gpu;
  r.gpus = n;
  r.solved = r.fits = true;
  r.hours = hours;
  r.cost_usd = cost;
  return r;
}

TEST(CapacityAnswers, CheapestFastestAndTheParetoFront) {
  CapacityReport report;
  report.rows = {Row("a", 1, 40, 100), Row("a", 2, 21, 105),        Row("a", 4, 11, 110),
                 Row("b", 1, 30, 120),  // slower and dearer than a x2: off the front
                 Row("b", 2, 10, 200), Row("c", 8, 5, std::nullopt)};
  report.rows.push_back(Row("d", 1, 0, 0));
  report.rows.back().fits = false;  // never an answer
  FindAnswers(report);
  EXPECT_EQ(*report.cheapest, 0u);
  EXPECT_EQ(*report.fastest, 5u);                               // unpriced, still the fastest
  EXPECT_EQ(report.pareto, (std::vector<size_t>{4, 2, 1, 0}));  // priced only, by time
  EXPECT_EQ(report.min_gpus.at("a"), 1);
  EXPECT_EQ(report.min_gpus.count("d"), 0u);
  // Fewest: one GPU of a or of b; b's is the faster.
  EXPECT_EQ(CapacityHeadline(report),
            "cheapest: 1x a, 40 h, $100; fastest: 8x c, 5.0 h, no price; fewest: 1x b");
}

TEST(CapacityAnswers, LimitsLeaveConfigurationsOut) {
  CapacityReport report;
  report.rows = {Row("a", 1, 40, 100), Row("a", 8, 6, 150)};
  report.rows[0].within_limits = false;  // over --max-hours
  FindAnswers(report);
  EXPECT_EQ(*report.cheapest, 1u);
  EXPECT_EQ(report.pareto, (std::vector<size_t>{1}));
  EXPECT_EQ(report.min_gpus.at("a"), 1);  // it fits, whatever the limits
}

}  // namespace
}  // namespace headroom
