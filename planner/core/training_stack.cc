#include "planner/core/training_stack.h"

#include <cstdlib>
#include <fstream>
#include <string>


namespace headroom {

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
