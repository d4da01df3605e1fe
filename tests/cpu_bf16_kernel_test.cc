// Which CPU bf16 kernel a machine runs, from its /proc/cpuinfo flags and ONEDNN_MAX_CPU_ISA,
// and when that kernel is one no scratch rule has measured (plan then refuses to guess).
#include <gtest/gtest.h>

#include "planner/core/training_stack.h"

namespace headroom {
namespace {

// Flags lines as /proc/cpuinfo prints them (abridged).
constexpr const char* kAvx2 = "fpu sse4_2 avx avx2 fma";
constexpr const char* kAvx512 = "avx2 avx512f avx512dq avx512bw avx512vl";
constexpr const char* kAvx512Bf16 = "avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16";
constexpr const char* kSapphireRapids =
    "avx512f avx512dq avx512bw avx512vl avx512_bf16 amx_bf16 amx_tile amx_int8";
constexpr const char* kGraniteRapids =
    "avx512f avx512dq avx512bw avx512vl avx512_bf16 amx_bf16 amx_tile amx_int8 amx_fp16";

TEST(CpuBf16Kernel, ReadFromTheFlags) {
  EXPECT_EQ(CpuBf16Of(kAvx2, ""), CpuBf16::kAtenGemm);
  EXPECT_EQ(CpuBf16Of(kAvx512, ""), CpuBf16::kEmulated);
  EXPECT_EQ(CpuBf16Of(kAvx512Bf16, ""), CpuBf16::kAvx512Bf16);
  EXPECT_EQ(CpuBf16Of(kSapphireRapids, ""), CpuBf16::kAmx);
  // A flag is a whole word: avx512_bf16 is not amx_bf16's prefix or suffix.
  EXPECT_EQ(CpuBf16Of("avx512f amx_bf16x", ""), CpuBf16::kAtenGemm);
}

TEST(CpuBf16Kernel, CappedByOnednnsIsaLimit) {
  EXPECT_EQ(CpuBf16Of(kSapphireRapids, "AVX512_CORE"), CpuBf16::kEmulated);
  EXPECT_EQ(CpuBf16Of(kSapphireRapids, "AVX512_CORE_BF16"), CpuBf16::kAvx512Bf16);
  EXPECT_EQ(CpuBf16Of(kSapphireRapids, "AVX512_CORE_AMX"), CpuBf16::kAmx);
  EXPECT_EQ(CpuBf16Of(kSapphireRapids, "AVX2"), CpuBf16::kAtenGemm);
  EXPECT_EQ(CpuBf16Of(kAvx512Bf16, "AVX512_CORE_AMX"), CpuBf16::kAvx512Bf16);  // a cap only
}

TEST(CpuBf16Kernel, AmxFp16IsNotTheMeasuredAmxKernel) {
  EXPECT_EQ(UnmeasuredBf16Kernel(kSapphireRapids, ""), std::nullopt);
  const auto granite = UnmeasuredBf16Kernel(kGraniteRapids, "");
  ASSERT_TRUE(granite.has_value());
  EXPECT_NE(granite->find("avx10_1_512_amx_fp16"), std::string::npos);
  // Capped at the measured AMX kernel, or below it, the rules apply again.
  EXPECT_EQ(UnmeasuredBf16Kernel(kGraniteRapids, "AVX512_CORE_AMX"), std::nullopt);
  EXPECT_EQ(UnmeasuredBf16Kernel(kGraniteRapids, "AVX512_CORE_BF16"), std::nullopt);
  for (const char* flags : {kAvx2, kAvx512, kAvx512Bf16})
    EXPECT_EQ(UnmeasuredBf16Kernel(flags, ""), std::nullopt) << flags;
}

}  // namespace
}  // namespace headroom
