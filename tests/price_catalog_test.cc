// The price file's rules (planner/core/price_catalog.h): what a price is worth, and every
// refusal one line naming the file, the field and the line it is on.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "planner/core/gpu_catalog.h"
#include "planner/core/price_catalog.h"

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

// The shipped file keeps every rule it is read under: each price within its bounds, each
// date a real one.
TEST(PriceCatalog, BuiltInPricesAreWithinTheBounds) {
  const PriceCatalog& prices = BuiltInPrices();
  EXPECT_TRUE(IsIsoDate(prices.as_of));
  EXPECT_GE(prices.gpus.size(), 10u);
  for (const auto& [gpu, p] : prices.gpus) {
    if (p.cloud) {
      EXPECT_GE(p.cloud->usd, price_limits::kMinUsdPerGpuHour) << gpu;
      EXPECT_LE(p.cloud->usd, price_limits::kMaxUsdPerGpuHour) << gpu;
      EXPECT_TRUE(IsIsoDate(p.cloud->date)) << gpu;
    }
    if (p.purchase) {
      EXPECT_GE(p.purchase->usd, price_limits::kMinPurchaseUsd) << gpu;
      EXPECT_LE(p.purchase->usd, price_limits::kMaxPurchaseUsd) << gpu;
      EXPECT_TRUE(IsIsoDate(p.purchase->date)) << gpu;
    }
  }
}

TEST(PriceCatalog, IsoDatesAreCalendarDates) {
  EXPECT_TRUE(IsIsoDate("2026-12-01"));
  EXPECT_TRUE(IsIsoDate("2024-02-29"));  // a leap year
  EXPECT_TRUE(IsIsoDate("2000-02-29"));  // divisible by 400
  EXPECT_TRUE(IsIsoDate("2026-01-31"));
  EXPECT_FALSE(IsIsoDate("1900-02-29"));  // divisible by 100, not by 400
  EXPECT_FALSE(IsIsoDate("2025-02-29"));
  EXPECT_FALSE(IsIsoDate("2026-02-30"));
  EXPECT_FALSE(IsIsoDate("2026-04-31"));
  EXPECT_FALSE(IsIsoDate("2026-99-99"));
  EXPECT_FALSE(IsIsoDate("2026-13-01"));
  EXPECT_FALSE(IsIsoDate("2026-00-10"));
  EXPECT_FALSE(IsIsoDate("2026-01-00"));
  EXPECT_FALSE(IsIsoDate("2026-1-01"));
  EXPECT_FALSE(IsIsoDate("2026/01/01"));
}

// A price file whose lines are numbered as written here: line 1 is as_of, line 7 the
// cloud quote, line 8 the purchase quote.
std::string PriceFile(const std::string& cloud_usd = "4.0",
                      const std::string& purchase_usd = "21900",
                      const std::string& cloud_date = "2026-11-01",
                      const std::string& as_of = "2026-11-30", const std::string& lifetime = "4",
                      const std::string& utilization = "0.6") {
  return "as_of: " + as_of +
         "\n"
         "owned:\n"
         "  lifetime_years: " +
         lifetime +
         "\n"
         "  utilization: " +
         utilization +
         "\n"
         "gpus:\n"
         "  h100-80gb:\n"
         "    cloud: {usd_per_gpu_hour: " +
         cloud_usd + ", provider: X, source: \"https://x\", date: " + cloud_date +
         "}\n"
         "    purchase: {usd: " +
         purchase_usd + ", provider: Y, source: \"https://y\", date: 2026-10-01}\n";
}

// The error a refused file gives: one line, "p.yaml: FIELD at line N: ...", and holding
// `what`.
void ExpectRefused(const std::string& yaml, const std::string& field, int line,
                   const std::string& what) {
  SCOPED_TRACE(yaml);
  Result<PriceCatalog> parsed = MakeError("not parsed");
  ASSERT_NO_THROW(parsed = ParsePriceCatalog(yaml, "p.yaml"));
  ASSERT_FALSE(parsed) << "accepted";
  const std::string& message = parsed.error().message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.rfind(fmt::format("p.yaml: {} at line {}: ", field, line), 0), 0u) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
}

TEST(PriceCatalog, TheTemplateFileParses) {
  auto parsed = ParsePriceCatalog(PriceFile(), "p.yaml");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_DOUBLE_EQ(parsed->gpus.at("h100-80gb").cloud->usd, 4.0);
  EXPECT_DOUBLE_EQ(parsed->lifetime_years, 4);
  // The bounds themselves are prices.
  EXPECT_TRUE(ParsePriceCatalog(PriceFile("0.001", "100000000"), "p.yaml"));
  EXPECT_TRUE(ParsePriceCatalog(PriceFile("10000", "1"), "p.yaml"));
  EXPECT_TRUE(ParsePriceCatalog(PriceFile("+4"), "p.yaml"));  // YAML allows the sign
  EXPECT_TRUE(ParsePriceCatalog(PriceFile("4", "21900", "2024-02-29"), "p.yaml"));
}

TEST(PriceCatalog, CloudPricesAreFiniteAndWithinBounds) {
  const std::string field = "h100-80gb.cloud.usd_per_gpu_hour";
  for (const char* inf : {".inf", "-.inf", "+.inf", ".Inf", ".nan", ".NaN", "inf", "nan"})
    ExpectRefused(PriceFile(inf), field, 7, "must be a finite number");
  for (const char* out : {"1e308", "5e-324", "0", "-4", "1e400", "10001", "0.0009", "-0"})
    ExpectRefused(PriceFile(out), field, 7, "must be between 0.001 and 10000 US$ per GPU-hour");
}

TEST(PriceCatalog, PurchasePricesAreFiniteAndWithinBounds) {
  const std::string field = "h100-80gb.purchase.usd";
  ExpectRefused(PriceFile("4", ".inf"), field, 8, "must be a finite number (got .inf)");
  for (const char* out : {"1e308", "5e-324", "0", "-21900", "0.5", "2e8"})
    ExpectRefused(PriceFile("4", out), field, 8, "must be between 1 and 1e+08 US$ per GPU");
}

TEST(PriceCatalog, OwnedLifetimeAndUtilizationAreFiniteAndBounded) {
  const auto owned = [](const char* lifetime, const char* utilization) {
    return PriceFile("4", "21900", "2026-11-01", "2026-11-30", lifetime, utilization);
  };
  ExpectRefused(owned(".inf", "0.6"), "owned.lifetime_years", 3, "must be a finite number");
  ExpectRefused(owned(".nan", "0.6"), "owned.lifetime_years", 3, "must be a finite number");
  for (const char* out : {"0", "-4", "51", "1e308", "0.05"})
    ExpectRefused(owned(out, "0.6"), "owned.lifetime_years", 3, "must be between 0.1 and 50 years");
  ExpectRefused(owned("4", ".inf"), "owned.utilization", 4, "must be a finite number");
  for (const char* out : {"0", "1.5", "-0.5", "0.001"})
    ExpectRefused(owned("4", out), "owned.utilization", 4, "must be between 0.01 and 1");
}

TEST(PriceCatalog, DatesAreRealDates) {
  for (const char* date : {"2026-99-99", "2026-02-30", "2026-13-01", "2025-02-29", "2026-04-31"})
    ExpectRefused(PriceFile("4", "21900", date), "h100-80gb.cloud.date", 7,
                  fmt::format("'{}' is not a calendar date", date));
  ExpectRefused(PriceFile("4", "21900", "2026-5-1"), "h100-80gb.cloud.date", 7,
                "must be a date, YYYY-MM-DD (got '2026-5-1')");
  for (const char* date : {"2026-99-99", "2026-02-30", "2026-13-01"})
    ExpectRefused(PriceFile("4", "21900", "2026-11-01", date), "as_of", 1,
                  "is not a calendar date");
  ExpectRefused(PriceFile("4", "21900", "[2026, 11, 1]"), "h100-80gb.cloud.date", 7,
                "must be text, got a list");
}

TEST(PriceCatalog, KeysGivenTwiceAreRefused) {
  // A GPU twice: yaml-cpp would keep one of them silently.
  ExpectRefused(PriceFile() +
                    "  h100-80gb:\n    cloud: {usd_per_gpu_hour: 1, source: s, "
                    "date: 2026-01-01}\n",
                "gpus.h100-80gb", 9, "given twice (first at line 6)");
  // A field twice in a quote, in a GPU's entry, in owned and at the top.
  ExpectRefused(R"(as_of: 2026-11-30
gpus:
  l4:
    cloud: {usd_per_gpu_hour: 1, source: s, date: 2026-01-01, usd_per_gpu_hour: 2}
)",
                "l4.cloud.usd_per_gpu_hour", 4, "given twice (first at line 4)");
  ExpectRefused(R"(as_of: 2026-11-30
gpus:
  l4:
    cloud: {usd_per_gpu_hour: 1, source: s, date: 2026-01-01}
    cloud: {usd_per_gpu_hour: 2, source: s, date: 2026-01-01}
)",
                "l4.cloud", 5, "given twice (first at line 4)");
  ExpectRefused(PriceFile() + "owned: {utilization: 1}\n", "owned", 9,
                "given twice (first at line 2)");
  ExpectRefused("as_of: 2026-11-30\nowned: {utilization: 0.5, utilization: 1}\ngpus: {}\n",
                "owned.utilization", 2, "given twice");
  ExpectRefused("as_of: 2026-11-30\ngpus: {}\nas_of: 2026-12-01\n", "as_of", 3,
                "given twice (first at line 1)");
}

TEST(PriceCatalog, UnknownGpusAndKeysNameTheClosest) {
  ExpectRefused(
      "as_of: 2026-11-30\ngpus:\n  h100-80g:\n    cloud: {usd_per_gpu_hour: 1, "
      "source: s, date: 2026-01-01}\n",
      "gpus.h100-80g", 3, "unknown GPU 'h100-80g'. Did you mean: h100-80gb");
  // Names are the catalog's exactly: QuoteFor looks them up so.
  ExpectRefused("as_of: 2026-11-30\ngpus:\n  H100-80GB: {}\n", "gpus.H100-80GB", 3,
                "Did you mean: h100-80gb");
  ExpectRefused("as-of: 2026-11-30\ngpus: {}\n", "as-of", 1,
                "unknown field 'as-of'. Did you mean: as_of?");
  ExpectRefused("as_of: 2026-11-30\nowned: {lifetime: 4}\ngpus: {}\n", "owned.lifetime", 2,
                "unknown field 'lifetime'. Did you mean: lifetime_years?");
  ExpectRefused("as_of: 2026-11-30\ngpus:\n  l4:\n    clod: {}\n", "l4.clod", 4,
                "unknown field 'clod'. Did you mean: cloud?");
  ExpectRefused(
      "as_of: 2026-11-30\ngpus:\n  l4:\n    cloud: {usd_per_gpu_hour: 1, provder: "
      "X, source: s, date: 2026-01-01}\n",
      "l4.cloud.provder", 4, "unknown field 'provder'. Did you mean: provider?");
  // An unknown key is shown escaped, in the field as in the message (found by the fuzzer).
  ExpectRefused("as_of: 2026-11-30\nowned: {\"utilizatio\\n\": 1}\ngpus: {}\n",
                "owned.utilizatio\\x0a", 2,
                "unknown field 'utilizatio\\x0a'. Did you mean: utilization?");
  // A purchase is priced in usd, not per hour.
  ExpectRefused(
      "as_of: 2026-11-30\ngpus:\n  l4:\n    purchase: {usd_per_gpu_hour: 1, "
      "source: s, date: 2026-01-01}\n",
      "l4.purchase.usd_per_gpu_hour", 4, "unknown field 'usd_per_gpu_hour'");
}

TEST(PriceCatalog, AMapOrListWhereAValueBelongsIsRefused) {
  ExpectRefused(PriceFile("[1, 2]"), "h100-80gb.cloud.usd_per_gpu_hour", 7,
                "must be a number, got a list");
  ExpectRefused(PriceFile("{a: 1}"), "h100-80gb.cloud.usd_per_gpu_hour", 7,
                "must be a number, got a map");
  ExpectRefused(PriceFile("~"), "h100-80gb.cloud.usd_per_gpu_hour", 7,
                "must be a number, got empty");
  ExpectRefused("as_of: 2026-11-30\ngpus:\n  l4:\n    cloud: 5\n", "l4.cloud", 4,
                "expected a map, got text");
  ExpectRefused("as_of: 2026-11-30\ngpus:\n  l4: [cloud]\n", "l4", 3, "expected a map, got a list");
  ExpectRefused("as_of: 2026-11-30\ngpus: [l4]\n", "gpus", 2, "expected a map, got a list");
  ExpectRefused("as_of: 2026-11-30\nowned: 4\ngpus: {}\n", "owned", 2, "expected a map, got text");
  ExpectRefused("as_of: [2026]\ngpus: {}\n", "as_of", 1, "must be text, got a list");
  ExpectRefused(
      "as_of: 2026-11-30\ngpus:\n  l4:\n    cloud: {usd_per_gpu_hour: 1, provider: "
      "{a: b}, source: s, date: 2026-01-01}\n",
      "l4.cloud.provider", 4, "must be text, got a map");
  // A line break or an escape sequence would forge lines of the text report.
  for (const char* text : {"a\\nb", "\\e[2K", "\\t", "\\x85"})
    ExpectRefused(fmt::format("as_of: 2026-11-30\ngpus:\n  l4:\n    cloud: {{usd_per_gpu_hour: "
                              "1, source: \"{}\", date: 2026-01-01}}\n",
                              text),
                  "l4.cloud.source", 4, "must be one line of text, with no control characters");
  // JSON cannot carry it: `capacity --json` would throw.
  ExpectRefused(
      "as_of: 2026-11-30\ngpus:\n  l4:\n    cloud: {usd_per_gpu_hour: 1, provider: "
      "\"R\xff\", source: s, date: 2026-01-01}\n",
      "l4.cloud.provider", 4, "must be UTF-8 text");
  ExpectRefused("as_of: 2026-11-30\ngpus:\n  ? [l4]\n  : {}\n", "gpus", 3,
                "a key must be a GPU name, got a list");
}

// What yaml-cpp's as<double> would throw BadConversion on: refused as a value, in one
// line naming the field.
TEST(PriceCatalog, AValueThatIsNotANumberIsRefused) {
  const std::string field = "h100-80gb.cloud.usd_per_gpu_hour";
  ExpectRefused(PriceFile("four"), field, 7, "'four' is not a number");
  ExpectRefused(PriceFile("4 dollars"), field, 7, "'4 dollars' is not a number");
  ExpectRefused(PriceFile("0x10"), field, 7, "'0x10' is not a number");
  ExpectRefused(PriceFile("\"4\\n5\""), field, 7, "'4\\x0a5' is not a number");  // one line
  ExpectRefused(PriceFile("4", "21900", "2026-11-01", "2026-11-30", "4y"), "owned.lifetime_years",
                3, "'4y' is not a number");
  // A long value is cut short in the message.
  ExpectRefused(PriceFile(std::string(5000, '9') + "x"), field, 7, "...' is not a number");
}

TEST(PriceCatalog, WholeFileErrorsAreOneLine) {
  for (const char* yaml : {"", "[1, 2]", "just text", "as_of: [", "{as_of: 2026-01-01"}) {
    auto parsed = ParsePriceCatalog(yaml, "p.yaml");
    ASSERT_FALSE(parsed) << yaml;
    EXPECT_EQ(parsed.error().message.rfind("p.yaml: ", 0), 0u) << parsed.error().message;
    EXPECT_EQ(parsed.error().message.find('\n'), std::string::npos) << parsed.error().message;
  }
  // yaml-cpp's message names the character it stopped at: after a NUL, a line break
  // (found by the fuzzer).
  const std::string nul = std::string("as_of: 2026-11-30\ngpus:\n  l4") + '\0' + "\n";
  auto bad_escape = ParsePriceCatalog(nul, "p.yaml");
  ASSERT_FALSE(bad_escape);
  EXPECT_EQ(bad_escape.error().message,
            "p.yaml: malformed YAML at line 4: unknown escape character: \\x0a");
  auto malformed = ParsePriceCatalog("as_of: 2026-11-30\ngpus: {l4: [\n", "p.yaml");
  ASSERT_FALSE(malformed);
  EXPECT_NE(malformed.error().message.find("malformed YAML at line"), std::string::npos)
      << malformed.error().message;
  ExpectRefused("as_of: 2026-11-30\n", "gpus", 1, "missing");
  ExpectRefused("gpus: {}\n", "as_of", 1, "missing");
}

}  // namespace
}  // namespace headroom
