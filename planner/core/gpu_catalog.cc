#include "planner/core/gpu_catalog.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "planner/core/name_suggest.h"

namespace headroom {
namespace {

constexpr int64_t kMiB = 1 << 20;
// cuBLAS workspace PyTorch allocates per handle/stream: 32 MiB on Hopper, else
// 4096 KiB * 2 + 16 KiB * 8 (CUBLAS_WORKSPACE_CONFIG defaults).
constexpr int64_t kCublasWorkspaceHopper = 32 * kMiB;
constexpr int64_t kCublasWorkspaceDefault = 4096 * 1024 * 2 + 16 * 1024 * 8;

}  // namespace

std::vector<DeviceSpec> GpuCatalog() {
  static const std::vector<DeviceSpec> catalog = [] {
    std::vector<DeviceSpec> out;
    const YAML::Node root = YAML::Load(std::string(GpuCatalogFiles()[0].text));
    for (const auto& entry : root) {
      const YAML::Node& n = entry.second;
      DeviceSpec d;
      d.name = entry.first.as<std::string>();
      d.description = n["description"].as<std::string>();
      d.memory_bytes = n["memory_mib"].as<int64_t>() * kMiB;
      d.context_bytes = n["context_mib"].as<int64_t>() * kMiB;
      d.compute_capability = n["compute_capability"].as<double>();
      d.cublas_workspace_bytes =
          d.compute_capability >= 9.0 ? kCublasWorkspaceHopper : kCublasWorkspaceDefault;
      for (const auto& t : n["tflops"])
        d.peak_tflops[t.first.as<std::string>()] = t.second.as<double>();
      d.bandwidth_gbps = n["bandwidth_gbps"].as<double>();
      d.matmul_efficiency = n["matmul_efficiency"].as<double>();
      d.bandwidth_efficiency = n["bandwidth_efficiency"].as<double>();
      d.link_gbps = n["link_gbps"].as<double>();
      d.network_gbps = n["network_gbps"].as<double>();
      d.host_link_gbps = n["host_link_gbps"].as<double>();
      out.push_back(std::move(d));
    }
    return out;
  }();
  return catalog;
}

std::vector<std::string> GpuNames() {
  std::vector<std::string> names;
  for (const DeviceSpec& d : GpuCatalog()) names.push_back(d.name);
  return names;
}

Result<DeviceSpec> FindGpu(std::string_view name) {
  const std::string wanted = AsciiLower(name);
  for (const DeviceSpec& d : GpuCatalog()) {
    if (d.name == wanted) return d;
  }
  return MakeError(fmt::format(
      "unknown GPU '{}'.{} Run `headroom gpus` for the catalog, or give --gpu-mem 24GiB.", name,
      DidYouMean(wanted, GpuNames())));
}

namespace {

// Upper-cased alphanumeric words: "NVIDIA A100-SXM4-80GB" -> NVIDIA, A100, SXM4, 80GB.
std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> words(1);
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      words.back() += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!words.back().empty()) {
      words.emplace_back();
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

// The words of a catalog description that name the model: without the vendor and brand,
// the memory size, the SXM form factor and any parenthesised note ("NVIDIA GeForce RTX 4090
// 24GB" -> RTX, 4090). PCIe stays: CUDA names an H100 PCIe "NVIDIA H100 PCIe", and its
// figures differ from the SXM part's.
std::vector<std::string> ModelWords(std::string_view description) {
  std::vector<std::string> model;
  for (const std::string& w : Words(description.substr(0, description.find('(')))) {
    const bool size =
        w.size() > 2 && w.ends_with("GB") && std::isdigit(static_cast<unsigned char>(w.front()));
    if (w == "NVIDIA" || w == "GEFORCE" || w.starts_with("SXM") || size) continue;
    model.push_back(w);
  }
  return model;
}

}  // namespace

std::optional<DeviceSpec> MatchGpu(std::string_view device_name, int64_t total_bytes) {
  const std::vector<std::string> words = Words(device_name);
  std::optional<DeviceSpec> best;
  size_t best_words = 0;
  for (const DeviceSpec& d : GpuCatalog()) {
    const std::vector<std::string> model = ModelWords(d.description);
    const bool named = !model.empty() && std::all_of(model.begin(), model.end(), [&](auto& w) {
      return std::find(words.begin(), words.end(), w) != words.end();
    });
    if (!named) continue;
    // The nearest memory; at equal memory the entry that names more (H100 PCIe over H100).
    const auto key = [&](const DeviceSpec& g, size_t words_named) {
      return std::make_pair(std::llabs(g.memory_bytes - total_bytes),
                            -static_cast<int64_t>(words_named));
    };
    if (!best || key(d, model.size()) < key(*best, best_words)) {
      best = d;
      best_words = model.size();
    }
  }
  return best;
}

DeviceSpec CustomGpu(int64_t memory_bytes) {
  DeviceSpec d;
  d.name = "custom";
  d.description = fmt::format("custom GPU budget of {} bytes", memory_bytes);
  d.memory_bytes = memory_bytes;
  d.context_bytes = 450 * kMiB;
  d.compute_capability = 8.0;
  d.cublas_workspace_bytes = kCublasWorkspaceDefault;
  d.peak_tflops = {{"fp32", 19.5}, {"tf32", 156}, {"bf16", 312}, {"fp16", 312}};
  d.bandwidth_gbps = 2039;
  d.link_gbps = 300;  // an A100-class node, as the compute figures above
  d.network_gbps = 25;
  d.host_link_gbps = 32;  // PCIe 4.0 x16
  d.speed_basis = false;
  return d;
}

DeviceSpec CpuDevice(int64_t memory_bytes) {
  DeviceSpec d;
  d.name = "cpu";
  d.description = "host CPU";
  d.is_cuda = false;
  d.memory_bytes = memory_bytes;
  d.peak_tflops = {{"fp32", 1.0}, {"bf16", 0.5}, {"fp16", 0.25}};
  d.bandwidth_gbps = 20;
  d.link_gbps = 5;  // gloo between processes of one host (shared memory copies)
  d.network_gbps = 1.25;
  return d;
}

int64_t HostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : int64_t{16} << 30;
}

}  // namespace headroom
