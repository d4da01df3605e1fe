// The attention kernel PyTorch 2.15 picks, case by case, against the rules of
// aten/src/ATen/native/transformers/cuda/sdp_utils.cpp (and sdp_utils_cpp.cpp on the CPU)
// and what transformers' SDPA integration passes (enable_gqa without a mask).
#include <gtest/gtest.h>

#include "models/attention_kernel_choice.h"
#include "models/build_graph.h"
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

// Gemma 3's sliding layers under SDPA, as transformers runs them (masking_utils.py
// _ignore_causal_mask_sdpa): below the window every layer runs is_causal; from the window
// on, the sliding layers take one bool mask, run non-causal and repeat K/V, while the
// global layers keep is_causal and enable_gqa.
TEST(AttentionKernelChoice, SlidingLayersTakeTheWindowMaskFromTheWindowOn) {
  const ModelSpec gemma = Model("gemma-3-27b");  // window 1024, head size 128, 16 of 32 K/V heads
  for (int64_t s : {1023, 1024}) {
    GraphOptions options{.attention_call = Cuda(9.0, DType::kBF16), .seq_len = s};
    const OpGraph g = *BuildGraph(gemma, options);
    int masks = 0, masked = 0, causal = 0, repeats = 0;
    for (int o = 0; o < g.num_ops(); ++o) {
      const OpNode& op = g.op(OpId{o});
      masks += op.kind == OpKind::kWindowMask;
      repeats += op.kind == OpKind::kRepeatKv;
      if (op.kind != OpKind::kSdpa) continue;
      if (op.inputs.size() == 4) {
        ++masked;
        EXPECT_FALSE(op.causal);
        EXPECT_EQ(op.attention_kernel, AttentionKernel::kCudnn);  // with a mask, d <= 128
      } else {
        ++causal;
        EXPECT_TRUE(op.causal);
      }
    }
    const int sliding = s >= 1024 ? 52 : 0;  // 5 of every 6 of its 62 layers
    EXPECT_EQ(masks, s >= 1024 ? 1 : 0) << s;
    EXPECT_EQ(masked, sliding) << s;
    EXPECT_EQ(causal, 62 - sliding) << s;
    EXPECT_EQ(repeats, 2 * sliding) << s;
  }
  // Head size 256 (Gemma 3 1B): cuDNN's limit is 128, flash takes no mask.
  ModelSpec small = Model("gemma-3-1b");
  const auto window = ChooseWindowAttentionKernel(
      small, {.seq_len = 512, .precision = Precision::kBf16, .kernels = {.cuda = true,
                                                                          .compute_capability = 9.0}});
  ASSERT_TRUE(window.has_value());
  EXPECT_EQ(window->kernel, AttentionKernel::kMemEfficient);
  EXPECT_TRUE(window->repeats_kv);
  EXPECT_FALSE(ChooseWindowAttentionKernel(small, {.seq_len = 511}).has_value());
}

}  // namespace
}  // namespace headroom
