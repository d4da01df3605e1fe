#include "planner/core/training_stack.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace headroom {

CpuBf16 HostCpuBf16() {
  CpuBf16 host = CpuBf16::kAtenGemm;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!line.starts_with("flags")) continue;
    line += ' ';
    auto has = [&](const char* flag) {
      return line.find(std::string(" ") + flag + " ") != std::string::npos;
    };
    if (has("amx_bf16")) {
      host = CpuBf16::kAmx;
    } else if (has("avx512_bf16")) {
      host = CpuBf16::kAvx512Bf16;
    } else if (has("avx512bw") && has("avx512vl") && has("avx512dq")) {
      host = CpuBf16::kEmulated;
    }
    break;
  }
  // oneDNN dispatches no higher than ONEDNN_MAX_CPU_ISA (e.g. AVX512_CORE: emulated), and
  // below avx512_core ATen does not use it for bf16 at all.
  if (const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA"); isa != nullptr && *isa != '\0') {
    const std::string cap = isa;
    auto at_most = [&](CpuBf16 limit) {
      // Ordered from the most capable kernel down: amx, avx512-bf16, emulated, aten.
      return static_cast<int>(host) > static_cast<int>(limit) ? host : limit;
    };
    if (cap == "ALL" || cap == "DEFAULT" || cap.find("AMX") != std::string::npos) return host;
    if (cap.find("BF16") != std::string::npos || cap.starts_with("AVX10"))
      return at_most(CpuBf16::kAvx512Bf16);
    if (cap.starts_with("AVX512")) return at_most(CpuBf16::kEmulated);
    return CpuBf16::kAtenGemm;
  }
  return host;
}

int HostCpuThreads() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp != nullptr) {
    const int n = std::atoi(omp);
    if (n > 0) return n;
  }
  // Physical cores: distinct (physical id, core id) pairs.
  std::set<std::pair<std::string, std::string>> cores;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, package;
  auto value = [](const std::string& l) { return l.substr(l.find(':') + 1); };
  while (std::getline(cpuinfo, line)) {
    if (line.starts_with("physical id")) package = value(line);
    if (line.starts_with("core id")) cores.insert({package, value(line)});
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace headroom
