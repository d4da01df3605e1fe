// The training code that runs a plan and the device kernels it reaches: the same model
// and config allocate differently under a plain PyTorch loop, HF Trainer or headroom's
// own runtime, and on CUDA or on a CPU with or without native bf16.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "planner/core/enum_table.h"
#include "planner/core/result.h"

namespace headroom {

enum class Stack {
  kPytorch,    // a plain loop: torch.optim defaults, model config as loaded (use_cache)
  kHfTrainer,  // transformers' Trainer: adamw_torch_fused
  kHeadroom,   // `headroom train`: LibTorch's per-parameter optimizers, its own dropout
};
inline constexpr EnumName<Stack> kStackNames[] = {{Stack::kPytorch, "pytorch"},
                                                  {Stack::kHfTrainer, "hf-trainer"},
                                                  {Stack::kHeadroom, "headroom"}};
inline std::string_view StackName(Stack s) { return NameIn(kStackNames, s); }
inline Result<Stack> ParseStack(std::string_view name) {
  return ParseIn(kStackNames, name, "stack");
}
// pytorch and hf-trainer run transformers + PEFT with torch.optim; headroom runs LibTorch.
inline bool RunsPythonStack(Stack s) { return s != Stack::kHeadroom; }

// How an optimizer walks its parameters (torch.optim's foreach / fused arguments).
enum class OptimizerImpl {
  kForLoop,  // one parameter at a time: temporaries the size of one parameter
  kForeach,  // _foreach_* over the whole group: temporaries the size of all of them
  kFused,    // one fused kernel per group: no temporaries
};
inline constexpr EnumName<OptimizerImpl> kOptimizerImplNames[] = {
    {OptimizerImpl::kForLoop, "for-loop"},
    {OptimizerImpl::kForeach, "foreach"},
    {OptimizerImpl::kFused, "fused"}};
inline std::string_view OptimizerImplName(OptimizerImpl impl) {
  return NameIn(kOptimizerImplNames, impl);
}
inline Result<OptimizerImpl> ParseOptimizerImpl(std::string_view name) {
  return ParseIn(kOptimizerImplNames, name, "optimizer implementation");
}

// How a CPU multiplies bf16 matrices, which sets the scratch each product allocates.
// ATen hands bf16 products to oneDNN only when ideep::has_bf16_type_support() (AVX-512
// BW/VL/DQ, i.e. oneDNN's avx512_core, or AVX-NE-CONVERT); otherwise its own cpublas gemm
// (aten/src/ATen/native/CPUBlas.cpp, gemm_stub) runs, which allocates no tensor.
enum class CpuBf16 {
  kAmx,         // oneDNN's AMX brgemm: a scratchpad of B copies, tile and batch buffers
  kAvx512Bf16,  // oneDNN's AVX512-BF16 brgemm: a scratchpad of a row block and an input panel
  kEmulated,    // oneDNN on AVX-512 without bf16 instructions: the product computed into fp32
  kAtenGemm,    // no AVX-512: ATen's own gemm, no scratch (measured on an AVX2-only CPU)
};
// "native" is amx.
inline constexpr EnumName<CpuBf16> kCpuBf16Names[] = {{CpuBf16::kAmx, "amx"},
                                                      {CpuBf16::kAvx512Bf16, "avx512-bf16"},
                                                      {CpuBf16::kEmulated, "emulated"},
                                                      {CpuBf16::kAtenGemm, "aten"},
                                                      {CpuBf16::kAmx, "native"}};
inline std::string_view CpuBf16Name(CpuBf16 kind) { return NameIn(kCpuBf16Names, kind); }
inline Result<CpuBf16> ParseCpuBf16(std::string_view name) {
  return ParseIn(kCpuBf16Names, name, "CPU bf16 kind");
}

// The device kernel facts the cost rules depend on.
struct KernelTarget {
  bool cuda = true;
  CpuBf16 cpu_bf16 = CpuBf16::kAmx;  // CPU only
  // CPU only: torch's intra-op threads; oneDNN books its scratchpad per thread.
  int cpu_threads = 1;
  // CUDA only: the GPU's compute capability, which sets the attention kernels available
  // (flash needs sm80+). 0: not known, planned as a current data-centre GPU (sm80+).
  double compute_capability = 0;
  bool operator==(const KernelTarget&) const = default;
};

// The bf16 kernel of a CPU with these /proc/cpuinfo flags: amx_bf16, avx512_bf16 or
// avx512bw+vl+dq, capped by ONEDNN_MAX_CPU_ISA's value the way oneDNN caps its own
// dispatch (and ideep's bf16 check). HostCpuBf16: this machine's.
CpuBf16 CpuBf16Of(std::string_view cpu_flags, std::string_view isa_cap);
CpuBf16 HostCpuBf16();
// The oneDNN kernel such a CPU's bf16 products run in when no rule has measured its
// scratch, else nullopt: a CPU with AMX-FP16 (Granite Rapids on), where oneDNN dispatches
// avx512_core_amx_fp16 ("avx10_1_512_amx_fp16") unless ONEDNN_MAX_CPU_ISA caps it lower.
std::optional<std::string> UnmeasuredBf16Kernel(std::string_view cpu_flags,
                                                std::string_view isa_cap);
std::optional<std::string> UnmeasuredHostBf16Kernel();
// The intra-op threads torch starts with here: OMP_NUM_THREADS when set, else the
// physical cores (c10's default intra-op pool size, from cpuinfo's core count).
int HostCpuThreads();

}  // namespace headroom
