// The safetensors format (Hugging Face): an 8-byte little-endian header length, a JSON
// header mapping each tensor name to its dtype, shape and byte range, then the raw
// little-endian data. Reading checks the whole header against the file before any data
// is used, so a truncated or inconsistent file is an error that names the tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>

namespace headroom {

class SafetensorsFile {
 public:
  struct Entry {
    c10::ScalarType dtype;
    std::vector<int64_t> shape;
    int64_t begin = 0, end = 0;  // byte range within the data section
  };

  // Reads and validates the header; throws std::runtime_error naming the file and,
  // where one is at fault, the tensor.
  explicit SafetensorsFile(std::filesystem::path path);

  const std::map<std::string, Entry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::filesystem::path& path() const { return path_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // The tensor's data as a new CPU tensor of its stored dtype.
  at::Tensor Read(const std::string& name) const;

 private:
  std::filesystem::path path_;
  int64_t data_start_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (any device, contiguous or not) in the given order, atomically: to a
// temporary file in the same directory, renamed over `path` once complete.
void WriteSafetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Hugging Face checkpoints: a .safetensors file, a sharded checkpoint's
// model.safetensors.index.json, or a directory holding either. Each tensor name maps to
// the shard that stores it.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::filesystem::path& path);

  bool contains(const std::string& name) const { return shard_of_.count(name) != 0; }
  const SafetensorsFile::Entry& entry(const std::string& name) const;
  at::Tensor Read(const std::string& name) const;
  size_t size() const { return shard_of_.size(); }
  std::string description() const;  // for messages: the file, or the index and shard count

 private:
  std::filesystem::path origin_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> shard_of_;
};

}  // namespace headroom
