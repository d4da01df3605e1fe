#include <gtest/gtest.h>

#include <cstdint>

#include "models/catalog.h"
#include "planner/core/byte_units.h"
#include "planner/core/number_parse.h"
#include "planner/core/training_config.h"
#include "planner/plan/plan_request.h"

namespace headroom {
namespace {

// train --auto names the GPU it runs on from cudaDeviceProp::name, as the driver writes it.
TEST(GpuCatalog, DriverNamesMatchTheirCatalogEntry) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  EXPECT_EQ(MatchGpu("NVIDIA H200", 140 * kGiB)->name, "h200");
  EXPECT_EQ(MatchGpu("NVIDIA H100 80GB HBM3", 80 * kGiB)->name, "h100-80gb");
  // Same memory, different part: the PCIe card is named as such.
  EXPECT_EQ(MatchGpu("NVIDIA H100 PCIe", 80 * kGiB)->name, "h100-pcie");
  EXPECT_EQ(MatchGpu("NVIDIA B200", 179 * kGiB)->name, "b200");
  // A100 40GB and 80GB share the model word: the memory decides.
  EXPECT_EQ(MatchGpu("NVIDIA A100-SXM4-80GB", 80 * kGiB)->name, "a100-80gb");
  EXPECT_EQ(MatchGpu("NVIDIA A100-SXM4-40GB", 40 * kGiB)->name, "a100-40gb");
  EXPECT_EQ(MatchGpu("NVIDIA GeForce RTX 4090", 24 * kGiB)->name, "rtx-4090");
  EXPECT_EQ(MatchGpu("NVIDIA L4", 23 * kGiB)->name, "l4");  // not L40S
  EXPECT_FALSE(MatchGpu("NVIDIA B300", 288 * kGiB));
  EXPECT_FALSE(MatchGpu("", 0));
}

TEST(ParseBytes, UnitsArePowersOfTenOrTwo) {
  EXPECT_EQ(*ParseBytes("24GiB"), 24LL * 1024 * 1024 * 1024);
  EXPECT_EQ(*ParseBytes("80GB"), 80'000'000'000LL);
  EXPECT_EQ(*ParseBytes("512 MiB"), 512LL * 1024 * 1024);
  EXPECT_EQ(*ParseBytes("1.5gib"), 1610612736LL);
  EXPECT_EQ(*ParseBytes("4096"), 4096);
  EXPECT_FALSE(ParseBytes("0GiB").ok());
  EXPECT_FALSE(ParseBytes("-3GB").ok());
  EXPECT_FALSE(ParseBytes("12 parsecs").ok());
}

TEST(ParseBytes, AtLeastOneByteAndAtMost63Bits) {
  EXPECT_FALSE(ParseBytes("0.4B").ok());  // rounds to 0: was "no limit"
  EXPECT_EQ(*ParseBytes("0.6B"), 1);
  EXPECT_EQ(*ParseBytes("8388607TiB"), int64_t{8388607} << 40);  // just below 2^63
  EXPECT_FALSE(ParseBytes("8388608TiB").ok());                   // 2^63
  EXPECT_FALSE(ParseBytes("18446744073709551616").ok());
  EXPECT_FALSE(ParseBytes("1e400").ok());
  EXPECT_FALSE(ParseBytes("1.2.3GB").ok());
  EXPECT_FALSE(ParseBytes("nan").ok());
}

TEST(ParseInteger, WholeTextWithinRangeNeverClamped) {
  EXPECT_EQ(*ParseInteger("42", 1, 100, "--x"), 42);
  for (const char* bad : {"", "0", "101", "4.0", "0x10", "+4", " 4", "4 ", "1e3",
                          "18446744073709551616", "-9223372036854775809"}) {
    const Result<int64_t> r = ParseInteger(bad, 1, 100, "--x");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("--x"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(*ParseInteger("-9223372036854775808", INT64_MIN, INT64_MAX, "--seed"), INT64_MIN);
}

TEST(ParseReal, FiniteWithinRange) {
  EXPECT_DOUBLE_EQ(*ParseReal("0.05", 0, 0.5, "--margin"), 0.05);
  EXPECT_DOUBLE_EQ(*ParseReal("1e-3", 0, 1, "--lr"), 1e-3);
  for (const char* bad : {"nan", "inf", "-inf", "0.6", "-0.1", "1e-400", "0.1x", ""})
    EXPECT_FALSE(ParseReal(bad, 0, 0.5, "--margin").ok()) << bad;
}

TEST(CheckpointPolicy, ParsesAndResolves) {
  auto every = CheckpointPolicy::Parse("every:2");
  ASSERT_TRUE(every.ok());
  EXPECT_EQ(*every->Resolve(5), (std::vector<bool>{true, false, true, false, true}));

  auto layers = CheckpointPolicy::Parse("layers:0,2-3");
  ASSERT_TRUE(layers.ok());
  EXPECT_EQ(*layers->Resolve(4), (std::vector<bool>{true, false, true, true}));
  EXPECT_FALSE(layers->Resolve(3).ok());  // layer 3 does not exist

  EXPECT_EQ(*CheckpointPolicy::Parse("all")->Resolve(2), (std::vector<bool>{true, true}));
  EXPECT_EQ(*CheckpointPolicy::Parse("none")->Resolve(2), (std::vector<bool>{false, false}));
  EXPECT_FALSE(CheckpointPolicy::Parse("every:0").ok());
  EXPECT_FALSE(CheckpointPolicy::Parse("layers:3-1").ok());
  EXPECT_FALSE(CheckpointPolicy::Parse("sometimes").ok());
}

TEST(Precision, RegimesStoreAndComputeAsDocumented) {
  const PrecisionRegime amp = RegimeOf(*ParsePrecision("amp-bf16"));
  EXPECT_EQ(amp.param_dtype, DType::kF32);
  EXPECT_EQ(amp.compute_dtype, DType::kBF16);
  EXPECT_TRUE(amp.autocast);
  const PrecisionRegime mixed = RegimeOf(*ParsePrecision("mixed-fp16"));
  EXPECT_EQ(mixed.param_dtype, DType::kF16);
  EXPECT_TRUE(mixed.master_weights);
  EXPECT_TRUE(mixed.loss_scaling);
  EXPECT_EQ(RegimeOf(*ParsePrecision("bf16")).optimizer_state_dtype, DType::kBF16);
  EXPECT_FALSE(ParsePrecision("fp8").ok());
  EXPECT_FALSE(ParseOptimizer("lion").ok());
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(AttentionAsExecuted, CpuSdpaWithDropoutIsPlannedAsEager) {
  const ModelSpec gpt2 = *LoadCatalogModel("tiny-gpt2");    // attention dropout 0.1
  const ModelSpec llama = *LoadCatalogModel("tiny-llama");  // none
  const DeviceSpec cpu = CpuDevice(int64_t{1} << 30);
  const DeviceSpec h100 = *FindGpu("h100-80gb");
  EXPECT_EQ(AttentionAsExecuted(gpt2, AttentionImpl::kSdpa, cpu), AttentionImpl::kEager);
  EXPECT_EQ(AttentionAsExecuted(llama, AttentionImpl::kSdpa, cpu), AttentionImpl::kSdpa);
  EXPECT_EQ(AttentionAsExecuted(gpt2, AttentionImpl::kSdpa, h100), AttentionImpl::kSdpa);
  EXPECT_EQ(AttentionAsExecuted(gpt2, AttentionImpl::kEager, h100), AttentionImpl::kEager);
}

}  // namespace
}  // namespace headroom
