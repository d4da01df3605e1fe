#include "runtime/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "planner/core/file_io.h"
#include "runtime/errors.h"
#include "runtime/formats/safetensors_header.h"

namespace headroom {
namespace {

constexpr std::pair<const char*, c10::ScalarType> kDTypes[] = {
    {"F64", c10::kDouble}, {"F32", c10::kFloat}, {"F16", c10::kHalf},  {"BF16", c10::kBFloat16},
    {"I64", c10::kLong},   {"I32", c10::kInt},   {"I16", c10::kShort}, {"I8", c10::kChar},
    {"U8", c10::kByte},    {"BOOL", c10::kBool},
};

std::optional<c10::ScalarType> ParseDType(const std::string& name) {
  for (const auto& [text, type] : kDTypes)
    if (name == text) return type;
  return std::nullopt;
}

const char* DTypeName(c10::ScalarType type) {
  for (const auto& [text, t] : kDTypes)
    if (t == type) return text;
  throw std::invalid_argument(std::string("safetensors cannot store dtype ") + c10::toString(type));
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::filesystem::path path) : path_(std::move(path)) {
  const std::string where = path_.string();
  ThrowIfError(CheckRegularFile(path_));
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw std::runtime_error(where + ": cannot open");
  const auto file_size = static_cast<int64_t>(std::filesystem::file_size(path_));
  std::string first(8, '\0');
  in.read(first.data(), 8);
  first.resize(static_cast<size_t>(in.gcount()));
  const int64_t length = ValueOrThrow(SafetensorsHeaderLength(first, file_size, where));
  std::string json(static_cast<size_t>(length), '\0');
  if (!in.read(json.data(), length)) throw std::runtime_error(where + ": cannot read the header");
  SafetensorsHeader header = ValueOrThrow(ParseSafetensorsHeader(json, file_size, where));
  data_start_ = header.data_start;
  metadata_ = std::move(header.metadata);
  for (auto& [name, parsed] : header.entries) {
    const std::optional<c10::ScalarType> dtype = ParseDType(parsed.dtype);
    if (!dtype) throw std::logic_error("safetensors: the header parser accepted " + parsed.dtype);
    entries_.emplace(name, Entry{*dtype, std::move(parsed.shape), parsed.begin, parsed.end});
  }
}

at::Tensor SafetensorsFile::Read(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw std::runtime_error(path_.string() + ": no tensor '" + name + "'");
  const Entry& e = it->second;
  at::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(data_start_ + e.begin);
  if (!in.read(static_cast<char*>(t.data_ptr()), e.end - e.begin))
    throw std::runtime_error(path_.string() + ": tensor '" + name + "': read failed");
  return t;
}

void WriteSafetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    at::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    header[name] = {{"dtype", DTypeName(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(t));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  ThrowIfError(CreateParentDirectories(path));
  ThrowIfError(WriteFileAtomically(path, [&](std::ostream& out) {
    unsigned char size_bytes[8];
    for (int i = 0; i < 8; ++i) size_bytes[i] = static_cast<unsigned char>(text.size() >> (8 * i));
    out.write(reinterpret_cast<const char*>(size_bytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const at::Tensor& t : data)
      out.write(static_cast<const char*>(t.const_data_ptr()),
                static_cast<std::streamsize>(t.numel() * static_cast<int64_t>(t.element_size())));
  }));
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::filesystem::path& path) : origin_(path) {
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path)) {
    if (std::filesystem::exists(path / "model.safetensors.index.json"))
      file = path / "model.safetensors.index.json";
    else if (std::filesystem::exists(path / "model.safetensors"))
      file = path / "model.safetensors";
    else
      throw std::runtime_error(path.string() +
                               ": no model.safetensors or model.safetensors.index.json in it");
  }
  if (file.extension() != ".json") {
    shards_.emplace_back(file);
  } else {
    const std::string text = ValueOrThrow(ReadRegularFile(file));
    const nlohmann::json index = nlohmann::json::parse(text, nullptr, false);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw std::runtime_error(file.string() + ": not a safetensors index (no weight_map)");
    std::map<std::string, size_t> shard_index;
    for (const auto& [name, shard] : index["weight_map"].items()) {
      if (!shard.is_string())
        throw std::runtime_error(file.string() + ": tensor '" + name + "' maps to no shard file");
      const std::string shard_name = shard.get<std::string>();
      if (!shard_index.count(shard_name)) {
        shard_index[shard_name] = shards_.size();
        shards_.emplace_back(file.parent_path() / shard_name);
      }
      if (!shards_[shard_index[shard_name]].contains(name))
        throw std::runtime_error(file.string() + ": the index puts tensor '" + name + "' in " +
                                 shard_name + ", which does not hold it");
    }
  }
  for (size_t i = 0; i < shards_.size(); ++i)
    for (const auto& [name, entry] : shards_[i].entries()) shard_of_.emplace(name, i);
}

const SafetensorsFile::Entry& SafetensorsCheckpoint::entry(const std::string& name) const {
  return shards_.at(shard_of_.at(name)).entries().at(name);
}

at::Tensor SafetensorsCheckpoint::Read(const std::string& name) const {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) throw std::runtime_error(description() + ": no tensor '" + name + "'");
  return shards_[it->second].Read(name);
}

std::string SafetensorsCheckpoint::description() const {
  if (shards_.size() == 1) return shards_[0].path().string();
  return origin_.string() + " (" + std::to_string(shards_.size()) + " shards)";
}

}  // namespace headroom
