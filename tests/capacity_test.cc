// The pieces of `headroom capacity` that need no sweep: the answers drawn from a table of
// configurations, a row's hours and cost, and the outputs of any report, whatever its
// numbers (the price file's rules are price_catalog_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "planner/core/gpu_catalog.h"
#include "planner/core/parallelism.h"
#include "planner/core/price_catalog.h"
#include "planner/plan/capacity_sweep.h"
#include "planner/report/capacity_html.h"
#include "planner/report/capacity_report.h"

namespace headroom {
namespace {

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

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(CapacityCost, HoursAndCostArePositiveAndFiniteOrNone) {
  EXPECT_DOUBLE_EQ(*JobHours(3.6e6, 1000), 1.0);  // 3.6e6 tokens at 1000/s: one hour
  EXPECT_FALSE(JobHours(1e9, 0));                 // no speed: 1e9 / 0 is infinite
  EXPECT_FALSE(JobHours(1e9, kInf));              // 0 hours
  EXPECT_FALSE(JobHours(1e9, kNaN));
  EXPECT_FALSE(JobHours(1e9, -5));
  EXPECT_FALSE(JobHours(1e308, 1e-10));  // overflows
  EXPECT_DOUBLE_EQ(*JobCost(2, 4, 2.5), 20.0);
  EXPECT_FALSE(JobCost(2, 4, std::nullopt));  // no price
  EXPECT_FALSE(JobCost(1e300, 8, 1e10));      // $inf
  EXPECT_FALSE(JobCost(5e-324, 1, 0.001));    // $0
  EXPECT_FALSE(JobCost(1, 1, kNaN));
}

TEST(CapacityAnswers, InfiniteOrZeroHoursAndCostsAreNotAnswersOrPrices) {
  CapacityReport report;
  report.rows = {Row("a", 1, 40, 100),  Row("a", 2, 0, 50),  // no time: not an answer
                 Row("b", 1, 30, kInf),                      // an answer, but unpriced
                 Row("b", 2, kInf, 10), Row("c", 1, kNaN, 10),
                 Row("c", 2, 20, 0),    Row("c", 4, 10, kNaN)};
  FindAnswers(report);
  EXPECT_EQ(*report.cheapest, 0u);
  EXPECT_EQ(*report.fastest, 6u);  // 10 h; its cost is unknown
  EXPECT_EQ(report.pareto, (std::vector<size_t>{0}));
  EXPECT_FALSE(report.rows[1].answer());
  EXPECT_FALSE(report.rows[3].answer());
  EXPECT_FALSE(report.rows[4].answer());
  EXPECT_TRUE(report.rows[2].answer());
  EXPECT_FALSE(report.rows[2].known_cost());
  EXPECT_FALSE(report.rows[5].known_cost());
  EXPECT_EQ(CapacityHeadline(report),
            "cheapest: 1x a, 40 h, $100; fastest: 4x c, 10 h, no price; fewest: 1x b");
}

// Prices and names a report's assumptions print: a hostile origin and provider.
PriceCatalog HostilePrices() {
  PriceCatalog prices;
  prices.as_of = "2026-11-30";
  prices.origin = "<script>alert(1)</script>.yaml";
  prices.gpus["h100-80gb"].cloud =
      PriceQuote{.usd = 4, .provider = "R&D <b>", .source = "javascript:alert(1)", .date = "x"};
  return prices;
}

// Every number the chart or the table could be handed: none may hang it, grow it without
// bound or put a NaN or an infinity in a coordinate.
CapacityReport ExtremeReport() {
  CapacityReport report;
  const double kTiny = std::numeric_limits<double>::denorm_min();
  const double kHuge = std::numeric_limits<double>::max();
  report.rows = {Row("h100-80gb", 1, 40, 100),    Row("h100-80gb", 2, 20, 0),
                 Row("h100-80gb", 4, 10, kInf),   Row("h100-80gb", 8, 5, kNaN),
                 Row("h100-80gb", 16, 1, kHuge),  Row("h100-80gb", 32, kTiny, kTiny),
                 Row("h100-80gb", 64, kHuge, 1),  Row("h100-80gb", 128, 0, 0),
                 Row("h100-80gb", 256, kInf, -1), Row("h100-80gb", 512, 1e-100, 1e100)};
  report.rows[3].time.tokens_per_second = kNaN;
  report.rows[4].time.mfu = kInf;
  FindAnswers(report);
  return report;
}

// How many ticks the chart draws: its grid lines.
size_t TicksIn(const std::string& html) {
  size_t n = 0;
  for (size_t at = html.find("stroke=\"#ddd\""); at != std::string::npos;
       at = html.find("stroke=\"#ddd\"", at + 1))
    ++n;
  return n;
}

TEST(CapacityHtml, TheChartIsBoundedWhateverTheNumbers) {
  const CapacityReport report = ExtremeReport();
  const std::string html = CapacityHtml({.model = "m", .training = "t"}, report, HostilePrices());
  EXPECT_LT(html.size(), 1u << 20);
  EXPECT_NE(html.find("<svg id=\"scatter\""), std::string::npos);
  // Two axes of at most about 30 ticks each.
  EXPECT_GT(TicksIn(html), 2u);
  EXPECT_LE(TicksIn(html), 62u);
  for (const char* bad : {"=\"nan", "=\"inf", "=\"-nan", "=\"-inf", ",nan", ",inf", "nan ", "inf ",
                          "$inf", "$nan", ">inf<", ">nan<"})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
}

// Costs over 200 decades: the old axis drew 1-2-5 steps over every one of them.
TEST(CapacityHtml, AWideChartDrawsAFewTicks) {
  CapacityReport report;
  report.rows = {Row("h100-80gb", 1, 1e-100, 1e100), Row("h100-80gb", 2, 1e100, 1e-100)};
  FindAnswers(report);
  const std::string html = CapacityHtml({.model = "m", .training = "t"}, report, HostilePrices());
  EXPECT_LE(TicksIn(html), 62u);
  EXPECT_LT(html.size(), 64u << 10);
}

TEST(CapacityHtml, EveryStringIsEscaped) {
  CapacityReport report;
  report.rows = {Row("h100-80gb", 1, 40, 100)};
  report.notes = {"<img src=x onerror=alert(1)>"};
  FindAnswers(report);
  const std::string html =
      CapacityHtml({.model = "<script>m</script>", .training = "R&D", .moe_routing = "'top-2'"},
                   report, HostilePrices());
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;.yaml"), std::string::npos);
  EXPECT_NE(html.find("R&amp;D &lt;b&gt;"), std::string::npos);
  EXPECT_NE(html.find("&#39;top-2&#39;"), std::string::npos);
  // A source is text, never a link: no scheme can run.
  EXPECT_EQ(html.find("href"), std::string::npos);
}

// The text and the JSON say the same of every row: a cost or time that is not a positive,
// finite number is "no price" / "no time" in the one and null in the other.
TEST(CapacityReport, TextAndJsonAgreeOnMissingPrices) {
  const CapacityReport report = ExtremeReport();
  const PriceCatalog prices = HostilePrices();
  const CapacitySubject subject{.model = "m", .training = "t"};
  const std::string text = FormatCapacityText(subject, report, prices);
  const nlohmann::json json = CapacityJson(subject, report, prices);
  for (const char* bad : {"$inf", "$nan", "$-", "inf h", "nan h", " nan", " inf"})
    EXPECT_EQ(text.find(bad), std::string::npos) << bad << " in\n" << text;
  EXPECT_EQ(text.substr(0, text.find('\n')), json["headline"].get<std::string>());
  ASSERT_EQ(json["configurations"].size(), report.rows.size());
  int unpriced = 0;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CapacityRow& r = report.rows[i];
    const nlohmann::json& row = json["configurations"][i];
    const std::string line_start = fmt::format("h100-80gb   {:>5}  ", r.gpus);
    const size_t at = text.find(line_start);
    ASSERT_NE(at, std::string::npos) << line_start;
    const std::string line = text.substr(at, text.find('\n', at) - at);
    SCOPED_TRACE(line);
    EXPECT_EQ(row["cost_usd"].is_null(), line.find("no price") != std::string::npos);
    EXPECT_EQ(row["hours"].is_null(), line.find("no time") != std::string::npos);
    unpriced += row["cost_usd"].is_null();
  }
  EXPECT_EQ(unpriced, 5);  // costs of 0, infinity and NaN, and the two rows with no time
  EXPECT_EQ(json["configurations"][0]["cost_usd"], 100.0);
  // The CSV leaves the same fields empty.
  const std::string csv = CapacityCsv(report);
  EXPECT_EQ(csv.find("inf"), std::string::npos) << csv;
  EXPECT_EQ(csv.find("nan"), std::string::npos) << csv;
}

TEST(CapacityReport, CsvFieldsAreEscaped) {
  CapacityReport report;
  report.rows = {Row("=HYPERLINK(\"x\")", 1, 40, 100), Row("a,b", 2, 20, 100)};
  report.rows[1].fits = false;
  const std::string csv = CapacityCsv(report);
  EXPECT_NE(csv.find("\n\"'=HYPERLINK(\"\"x\"\")\",1,true,true,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n\"a,b\",2,false,true,"), std::string::npos) << csv;
}

TEST(CapacityReport, EachCountPrintsTheLinksItsTimeAssumes) {
  CapacityReport report;
  report.rows = {Row("h100-80gb", 1, 40, 100), Row("h100-80gb", 4, 11, 110),
                 Row("h100-80gb", 16, 3, 130)};
  for (CapacityRow& r : report.rows) {
    r.plan.config.parallel.gpus = r.gpus;
    r.plan.config.parallel.nodes = DefaultNodes(r.gpus);
  }
  const DeviceSpec h100 = *FindGpu("h100-80gb");
  const std::string text =
      FormatCapacityText({.model = "m", .training = "t"}, report, PriceCatalog{});
  EXPECT_NE(text.find(fmt::format("1x4 @ {:g} GB/s", h100.link_gbps)), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("2x8 @ {:g}/{:g} GB/s", h100.link_gbps, h100.network_gbps)),
            std::string::npos)
      << text;
  const nlohmann::json rows =
      CapacityJson({.model = "m", .training = "t"}, report, PriceCatalog{})["configurations"];
  EXPECT_TRUE(rows[0]["plan"]["interconnect"].is_null());  // one GPU: no links
  EXPECT_TRUE(rows[1]["plan"]["interconnect"]["network_gbps"].is_null());
  EXPECT_EQ(rows[2]["plan"]["interconnect"]["nodes"], 2);
  EXPECT_EQ(rows[2]["plan"]["interconnect"]["gpus_per_node"], 8);
  EXPECT_EQ(rows[2]["plan"]["interconnect"]["network_gbps"], h100.network_gbps);
  const std::string csv = CapacityCsv(report);
  EXPECT_NE(csv.find(fmt::format(",2,8,{:g},{:g}\n", h100.link_gbps, h100.network_gbps)),
            std::string::npos)
      << csv;
  for (size_t at = 0; at < csv.size(); at = csv.find('\n', at) + 1)  // every line 19 fields
    EXPECT_EQ(std::count(csv.begin() + at, csv.begin() + csv.find('\n', at), ','), 18) << csv;
}

}  // namespace
}  // namespace headroom
