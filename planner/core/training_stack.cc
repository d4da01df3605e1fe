#include "planner/core/training_stack.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace headroom {

namespace {

// The flags line of /proc/cpuinfo ("" when unreadable).
std::string HostCpuFlags() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.starts_with("flags")) return line.substr(line.find(':') + 1);
  }
  return "";
}

std::string HostIsaCap() {
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  return isa == nullptr ? "" : isa;
}

bool HasFlag(std::string_view flags, std::string_view flag) {
  const std::string padded = " " + std::string(flags) + " ";
  return padded.find(" " + std::string(flag) + " ") != std::string::npos;
}

}  // namespace

CpuBf16 CpuBf16Of(std::string_view cpu_flags, std::string_view isa_cap) {
  CpuBf16 host = CpuBf16::kAtenGemm;
  if (HasFlag(cpu_flags, "amx_bf16")) {
    host = CpuBf16::kAmx;
  } else if (HasFlag(cpu_flags, "avx512_bf16")) {
    host = CpuBf16::kAvx512Bf16;
  } else if (HasFlag(cpu_flags, "avx512bw") && HasFlag(cpu_flags, "avx512vl") &&
             HasFlag(cpu_flags, "avx512dq")) {
    host = CpuBf16::kEmulated;
  }
  // oneDNN dispatches no higher than ONEDNN_MAX_CPU_ISA (e.g. AVX512_CORE: emulated), and
  // below avx512_core ATen does not use it for bf16 at all.
  if (isa_cap.empty()) return host;
  auto at_most = [&](CpuBf16 limit) {
    // Ordered from the most capable kernel down: amx, avx512-bf16, emulated, aten.
    return static_cast<int>(host) > static_cast<int>(limit) ? host : limit;
  };
  if (isa_cap == "ALL" || isa_cap == "DEFAULT" || isa_cap.find("AMX") != std::string::npos)
    return host;
  if (isa_cap.find("BF16") != std::string::npos || isa_cap.starts_with("AVX10"))
    return at_most(CpuBf16::kAvx512Bf16);
  if (isa_cap.starts_with("AVX512")) return at_most(CpuBf16::kEmulated);
  return CpuBf16::kAtenGemm;
}

std::optional<std::string> UnmeasuredBf16Kernel(std::string_view cpu_flags,
                                                std::string_view isa_cap) {
  if (CpuBf16Of(cpu_flags, isa_cap) != CpuBf16::kAmx || !HasFlag(cpu_flags, "amx_fp16"))
    return std::nullopt;
  // oneDNN's names for the measured ISA, which stops below AMX-FP16.
  if (isa_cap == "AVX512_CORE_AMX" || isa_cap == "AVX10_1_512_AMX") return std::nullopt;
  return "oneDNN's brg_matmul:avx10_1_512_amx_fp16";
}

CpuBf16 HostCpuBf16() { return CpuBf16Of(HostCpuFlags(), HostIsaCap()); }

std::optional<std::string> UnmeasuredHostBf16Kernel() {
  return UnmeasuredBf16Kernel(HostCpuFlags(), HostIsaCap());
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
