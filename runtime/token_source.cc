#include "runtime/token_source.h"

#include <fstream>
#include <stdexcept>
#include <vector>

#include <torch/torch.h>

#include "planner/core/file_io.h"
#include "runtime/errors.h"

namespace headroom {
namespace {

// SplitMix64: a well-mixed hash of (seed, index), so samples are independent of order.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class SyntheticTokens final : public TokenSource {
 public:
  SyntheticTokens(int64_t vocab, uint64_t seed) : vocab_(vocab), seed_(seed) {}
  at::Tensor Sample(int64_t index, int64_t length) const override {
    const auto start = static_cast<int64_t>(Mix(seed_ ^ Mix(static_cast<uint64_t>(index))) %
                                            static_cast<uint64_t>(vocab_));
    return (torch::arange(length, torch::kLong) + start).remainder_(vocab_);
  }
  std::string description() const override { return "synthetic tokens (next = current + 1)"; }

 private:
  int64_t vocab_;
  uint64_t seed_;
};

// The whole file in memory as int64 ids: token files for fine-tuning are small next to
// the model, and checking every id against the vocabulary up front beats failing mid-run.
class TokenFile final : public TokenSource {
 public:
  TokenFile(std::filesystem::path path, at::Tensor ids)
      : path_(std::move(path)), ids_(std::move(ids)) {}
  at::Tensor Sample(int64_t index, int64_t length) const override {
    const int64_t windows = std::max<int64_t>(1, (ids_.numel() - 1) / length);
    const int64_t start = (index % windows) * length;
    return ids_.slice(0, start, start + length).clone();
  }
  std::string description() const override {
    return path_.string() + " (" + std::to_string(ids_.numel()) + " tokens)";
  }

 private:
  std::filesystem::path path_;
  at::Tensor ids_;
};

}  // namespace

std::unique_ptr<TokenSource> MakeSyntheticTokens(int64_t vocab_size, uint64_t seed) {
  return std::make_unique<SyntheticTokens>(vocab_size, seed);
}

std::unique_ptr<TokenSource> OpenTokenFile(const std::filesystem::path& path,
                                           TokenFileFormat format, int64_t vocab_size,
                                           int64_t sample_length) {
  const std::string where = path.string();
  ThrowIfError(CheckRegularFile(path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(where + ": cannot open the data file");
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  // Read whole and widened to int64 ids: 5x its size in host memory.
  constexpr int64_t kMaxTokenFileBytes = int64_t{4} << 30;
  if (bytes > kMaxTokenFileBytes)
    throw std::runtime_error(where + ": " + std::to_string(bytes) + " bytes is more than the " +
                             std::to_string(kMaxTokenFileBytes) + " a token file may have");
  const int64_t width = format == TokenFileFormat::kUint32   ? 4
                        : format == TokenFileFormat::kUint16 ? 2
                                                             : 1;
  if (bytes % width != 0)
    throw std::runtime_error(where + ": " + std::to_string(bytes) +
                             " bytes is not a whole number of " + std::to_string(8 * width) +
                             "-bit token ids (wrong --data-format?)");
  const at::ScalarType stored = width == 4   ? torch::kUInt32
                                : width == 2 ? torch::kUInt16
                                             : torch::kByte;
  at::Tensor raw = torch::empty({bytes / width}, torch::TensorOptions().dtype(stored));
  if (!in.read(static_cast<char*>(raw.data_ptr()), bytes))
    throw std::runtime_error(where + ": reading the data file failed");
  at::Tensor ids = raw.to(torch::kLong);
  if (format == TokenFileFormat::kText && vocab_size < 256)
    throw std::runtime_error(where +
                             ": byte-level text needs a vocabulary of at least 256 ids; the "
                             "model has " +
                             std::to_string(vocab_size));
  if (ids.numel() > 0) {
    const int64_t max_id = ids.max().item<int64_t>();
    if (max_id >= vocab_size) {
      const int64_t at = (ids >= vocab_size).nonzero()[0][0].item<int64_t>();
      throw std::runtime_error(where + ": token id " + std::to_string(max_id) +
                               " (first bad id at position " + std::to_string(at) +
                               ") is outside the model's vocabulary of " +
                               std::to_string(vocab_size) + " (wrong --data-format or tokenizer?)");
    }
  }
  if (ids.numel() < sample_length)
    throw std::runtime_error(where + ": " + std::to_string(ids.numel()) +
                             " tokens, fewer than one sample of " + std::to_string(sample_length));
  return std::make_unique<TokenFile>(path, ids);
}

}  // namespace headroom
