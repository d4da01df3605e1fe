#include "planner/training_stack.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <fmt/format.h>

namespace headroom {

std::string_view StackName(Stack s) {
  switch (s) {
    case Stack::kPytorch:
      return "pytorch";
    case Stack::kHfTrainer:
      return "hf-trainer";
    case Stack::kHeadroom:
      return "headroom";
  }
  return "?";
}

Result<Stack> ParseStack(std::string_view name) {
  for (Stack s : {Stack::kPytorch, Stack::kHfTrainer, Stack::kHeadroom}) {
    if (name == StackName(s)) return s;
  }
  return MakeError(fmt::format("unknown stack '{}' (use pytorch, hf-trainer or headroom)", name));
}

std::string_view OptimizerImplName(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::kForLoop:
      return "for-loop";
    case OptimizerImpl::kForeach:
      return "foreach";
    case OptimizerImpl::kFused:
      return "fused";
  }
  return "?";
}

Result<OptimizerImpl> ParseOptimizerImpl(std::string_view name) {
  for (OptimizerImpl i :
       {OptimizerImpl::kForLoop, OptimizerImpl::kForeach, OptimizerImpl::kFused}) {
    if (name == OptimizerImplName(i)) return i;
  }
  return MakeError(
      fmt::format("unknown optimizer implementation '{}' (use for-loop, foreach or fused)", name));
}

std::string_view CpuBf16Name(CpuBf16 kind) {
  switch (kind) {
    case CpuBf16::kAmx:
      return "amx";
    case CpuBf16::kAvx512Bf16:
      return "avx512-bf16";
    case CpuBf16::kEmulated:
      return "emulated";
  }
  return "?";
}

Result<CpuBf16> ParseCpuBf16(std::string_view name) {
  if (name == "native") return CpuBf16::kAmx;
  for (CpuBf16 k : {CpuBf16::kAmx, CpuBf16::kAvx512Bf16, CpuBf16::kEmulated}) {
    if (name == CpuBf16Name(k)) return k;
  }
  return MakeError(
      fmt::format("unknown CPU bf16 kind '{}' (use amx, avx512-bf16, emulated or native)", name));
}

CpuBf16 HostCpuBf16() {
  CpuBf16 host = CpuBf16::kEmulated;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!line.starts_with("flags")) continue;
    line += ' ';
    if (line.find(" amx_bf16 ") != std::string::npos) {
      host = CpuBf16::kAmx;
    } else if (line.find(" avx512_bf16 ") != std::string::npos) {
      host = CpuBf16::kAvx512Bf16;
    }
    break;
  }
  // oneDNN dispatches no higher than ONEDNN_MAX_CPU_ISA (e.g. AVX512_CORE: emulated).
  if (const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA"); isa != nullptr && *isa != '\0') {
    const std::string cap = isa;
    if (cap == "ALL" || cap == "DEFAULT") return host;
    if (cap.find("AMX") != std::string::npos) return host;
    if (cap.find("BF16") != std::string::npos || cap.starts_with("AVX10"))
      return host == CpuBf16::kAmx ? CpuBf16::kAvx512Bf16 : host;
    return CpuBf16::kEmulated;
  }
  return host;
}

}  // namespace headroom
