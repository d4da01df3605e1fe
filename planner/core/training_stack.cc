#include "planner/core/training_stack.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "planner/core/enum_names.h"

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
  return ParseByName(name, {Stack::kPytorch, Stack::kHfTrainer, Stack::kHeadroom}, StackName,
                     "stack");
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
  return ParseByName(name,
                     {OptimizerImpl::kForLoop, OptimizerImpl::kForeach, OptimizerImpl::kFused},
                     OptimizerImplName, "optimizer implementation");
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
  return ParseByName(name, {CpuBf16::kAmx, CpuBf16::kAvx512Bf16, CpuBf16::kEmulated}, CpuBf16Name,
                     "CPU bf16 kind");
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
