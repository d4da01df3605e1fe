// The attention kernel PyTorch 2.15 picks, case by case, against the rules of
// aten/src/ATen/native/transformers/cuda/sdp_utils.cpp (and sdp_utils_cpp.cpp on the CPU)
// and what transformers' SDPA integration passes (enable_gqa without a mask).
#include <gtest/gtest.h>

#include "models/attention_kernel_choice.h"
#include "models/catalog.h"

namespace headroom {
namespace {

AttentionCall Cuda(double cc, DType dtype, Stack stack = Stack::kPytorch) {
  return {.impl = AttentionImpl::kSdpa,
          .device = {.cuda = true, .compute_capability = cc},
          .dtype = dtype,
          .python_stack = RunsPythonStack(stack)};
}

ModelSpec Model(const char* name) { return *LoadCatalogModel(name); }

TEST(AttentionKernelChoice, Fp32GroupedHeadsRunTheMemoryEfficientKernel) {
  // No flash kernel for fp32; the 2.15 memory-efficient kernel reads grouped K/V.
  const auto c = ChooseAttentionKernel(Model("llama-3.2-1b"), Cuda(8.0, DType::kF32));
  EXPECT_EQ(c.kernel, AttentionKernel::kMemEfficient);
  EXPECT_FALSE(c.repeats_kv);
  EXPECT_NE(c.reason.find("no flash kernel for fp32"), std::string::npos) << c.reason;
}

TEST(AttentionKernelChoice, Bf16IsFlashOnAmpereAndCudnnOnHopper) {
  const ModelSpec llama = Model("llama-3.2-1b");
  EXPECT_EQ(ChooseAttentionKernel(llama, Cuda(8.0, DType::kBF16)).kernel, AttentionKernel::kFlash);
  EXPECT_EQ(ChooseAttentionKernel(llama, Cuda(9.0, DType::kBF16)).kernel, AttentionKernel::kCudnn);
  // The RTX 4090 (sm89) is not in check_prefer_cudnn_attention's list.
  EXPECT_EQ(ChooseAttentionKernel(llama, Cuda(8.9, DType::kBF16)).kernel, AttentionKernel::kFlash);
}

TEST(AttentionKernelChoice, CudnnTakesDropoutOnlyInSixteenths) {
  // GPT-2's attention dropout 0.1 is not a multiple of 1/16: flash on an H100.
  ModelSpec gpt2 = Model("gpt2");
  ASSERT_DOUBLE_EQ(gpt2.attention_dropout, 0.1);
  EXPECT_EQ(ChooseAttentionKernel(gpt2, Cuda(9.0, DType::kF16)).kernel, AttentionKernel::kFlash);
  gpt2.attention_dropout = 0.125;
  EXPECT_EQ(ChooseAttentionKernel(gpt2, Cuda(9.0, DType::kF16)).kernel, AttentionKernel::kCudnn);
}

TEST(AttentionKernelChoice, PreAmpereFp16IsMemoryEfficient) {
  EXPECT_EQ(ChooseAttentionKernel(Model("gpt2"), Cuda(7.5, DType::kF16)).kernel,
            AttentionKernel::kMemEfficient);
}

TEST(AttentionKernelChoice, ConsumerGpuBackwardLimitsFlashHeadSize) {
  // sm86/89 with grad: flash takes head sizes <= 192, or > 224 without dropout.
  ModelSpec m = Model("llama-3.2-1b");
  m.head_dim = 200;
  EXPECT_EQ(ChooseAttentionKernel(m, Cuda(8.9, DType::kBF16)).kernel,
            AttentionKernel::kMemEfficient);
  m.head_dim = 256;
  EXPECT_EQ(ChooseAttentionKernel(m, Cuda(8.9, DType::kBF16)).kernel, AttentionKernel::kFlash);
  EXPECT_EQ(ChooseAttentionKernel(m, Cuda(8.0, DType::kBF16)).kernel, AttentionKernel::kFlash);
}

TEST(AttentionKernelChoice, UnalignedFp32HeadFallsBackToMath) {
  ModelSpec m = Model("llama-3.2-1b");
  m.head_dim = 66;  // not a multiple of the fp32 GEMM alignment (4 on sm80+)
  EXPECT_EQ(ChooseAttentionKernel(m, Cuda(8.0, DType::kF32)).kernel, AttentionKernel::kMath);
}

TEST(AttentionKernelChoice, HeadroomRuntimeRepeatsKvItself) {
  const auto c =
      ChooseAttentionKernel(Model("llama-3.2-1b"), Cuda(8.0, DType::kBF16, Stack::kHeadroom));
  EXPECT_EQ(c.kernel, AttentionKernel::kFlash);
  EXPECT_TRUE(c.repeats_kv);
}

TEST(AttentionKernelChoice, CpuRunsItsFlashKernelEagerAndFlash2AsAsked) {
  AttentionCall cpu{.impl = AttentionImpl::kSdpa, .device = {.cuda = false}};
  EXPECT_EQ(ChooseAttentionKernel(Model("llama-3.2-1b"), cpu).kernel, AttentionKernel::kCpuFlash);
  cpu.impl = AttentionImpl::kEager;
  const auto eager = ChooseAttentionKernel(Model("llama-3.2-1b"), cpu);
  EXPECT_EQ(eager.kernel, AttentionKernel::kEager);
  EXPECT_TRUE(eager.repeats_kv);  // transformers' eager attention calls repeat_kv
  AttentionCall flash2 = Cuda(9.0, DType::kBF16);
  flash2.impl = AttentionImpl::kFlash2;
  const auto f2 = ChooseAttentionKernel(Model("llama-3.2-1b"), flash2);
  EXPECT_EQ(f2.kernel, AttentionKernel::kFlashAttn2);
  EXPECT_FALSE(f2.repeats_kv);
}

}  // namespace
}  // namespace headroom
