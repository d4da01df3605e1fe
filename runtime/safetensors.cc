#include "runtime/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "planner/core/file_io.h"
#include "runtime/errors.h"

namespace headroom {
namespace {

constexpr std::pair<const char*, c10::ScalarType> kDTypes[] = {
    {"F64", c10::kDouble}, {"F32", c10::kFloat}, {"F16", c10::kHalf},   {"BF16", c10::kBFloat16},
    {"I64", c10::kLong},   {"I32", c10::kInt},   {"I16", c10::kShort},  {"I8", c10::kChar},
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
  throw std::invalid_argument(std::string("safetensors cannot store dtype ") +
                              c10::toString(type));
}

// Header lengths above this are not a header but a corrupt or foreign file.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

}  // namespace

SafetensorsFile::SafetensorsFile(std::filesystem::path path) : path_(std::move(path)) {
  const std::string where = path_.string();
  ThrowIfError(CheckRegularFile(path_));
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw std::runtime_error(where + ": cannot open");
  const int64_t file_size = static_cast<int64_t>(std::filesystem::file_size(path_));
  uint64_t header_size = 0;
  unsigned char size_bytes[8];
  if (!in.read(reinterpret_cast<char*>(size_bytes), 8))
    throw std::runtime_error(where + ": not a safetensors file (shorter than its 8-byte header length)");
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | size_bytes[i];
  if (header_size > kMaxHeaderBytes || static_cast<int64_t>(8 + header_size) > file_size)
    throw std::runtime_error(where + ": not a safetensors file or truncated (header of " +
                             std::to_string(header_size) + " bytes in a file of " +
                             std::to_string(file_size) + ")");
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  data_start_ = static_cast<int64_t>(8 + header_size);
  const int64_t data_size = file_size - data_start_;

  nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw std::runtime_error(where + ": the header is not a JSON object");
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      if (value.is_object())
        for (const auto& [k, v] : value.items())
          if (v.is_string()) metadata_[k] = v.get<std::string>();
      continue;
    }
    const std::string what = where + ": tensor '" + name + "'";
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets") || !value["dtype"].is_string() ||
        !value["shape"].is_array() || !value["data_offsets"].is_array() ||
        value["data_offsets"].size() != 2)
      throw std::runtime_error(what + " has a malformed header entry");
    Entry e;
    const std::optional<c10::ScalarType> dtype = ParseDType(value["dtype"].get<std::string>());
    if (!dtype)
      throw std::runtime_error(what + " has dtype " + value["dtype"].get<std::string>() +
                               ", which headroom does not read");
    e.dtype = *dtype;
    int64_t elements = 1;
    for (const auto& d : value["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        throw std::runtime_error(what + " has a malformed shape");
      e.shape.push_back(d.get<int64_t>());
      elements *= e.shape.back();
    }
    e.begin = value["data_offsets"][0].get<int64_t>();
    e.end = value["data_offsets"][1].get<int64_t>();
    const int64_t expected = elements * static_cast<int64_t>(c10::elementSize(e.dtype));
    if (e.begin < 0 || e.end - e.begin != expected)
      throw std::runtime_error(what + ": its byte range [" + std::to_string(e.begin) + ", " +
                               std::to_string(e.end) + ") does not hold its shape and dtype (" +
                               std::to_string(expected) + " bytes)");
    if (e.end > data_size)
      throw std::runtime_error(what + " ends at data byte " + std::to_string(e.end) +
                               " but the file holds only " + std::to_string(data_size) +
                               " data bytes: the file is truncated");
    entries_.emplace(name, std::move(e));
  }
}

at::Tensor SafetensorsFile::Read(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw std::runtime_error(path_.string() + ": no tensor '" + name + "'");
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
    Result<std::string> text = ReadRegularFile(file);
    ThrowIfError(text ? std::nullopt : std::optional<Error>(text.error()));
    const nlohmann::json index = nlohmann::json::parse(*text, nullptr, false);
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
  if (it == shard_of_.end())
    throw std::runtime_error(description() + ": no tensor '" + name + "'");
  return shards_[it->second].Read(name);
}

std::string SafetensorsCheckpoint::description() const {
  if (shards_.size() == 1) return shards_[0].path().string();
  return origin_.string() + " (" + std::to_string(shards_.size()) + " shards)";
}

}  // namespace headroom
