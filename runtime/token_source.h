// Where training tokens come from. Samples are addressed by index, so the same index
// always yields the same tokens: a re-planned step after an OOM redoes exactly the
// samples of its effective batch, and a resumed run continues at the next one.
//   - synthetic: a learnable task, deterministic in the seed (runs of consecutive ids,
//     so the next token is always the current one + 1);
//   - a pre-tokenized binary file of uint16 or uint32 ids (nanoGPT's train.bin layout);
//   - plain text with a byte-level tokenizer: each byte is its own token id (0..255).
// File samples are consecutive non-overlapping windows, wrapping at the end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <ATen/Tensor.h>

#include "planner/core/enum_table.h"

namespace headroom {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Sample `index`: `length` token ids as an int64 tensor.
  virtual at::Tensor Sample(int64_t index, int64_t length) const = 0;
  virtual std::string description() const = 0;
};

std::unique_ptr<TokenSource> MakeSyntheticTokens(int64_t vocab_size, uint64_t seed);

enum class TokenFileFormat { kUint16, kUint32, kText };
inline constexpr EnumName<TokenFileFormat> kTokenFileFormatNames[] = {
    {TokenFileFormat::kUint16, "u16"},
    {TokenFileFormat::kUint32, "u32"},
    {TokenFileFormat::kText, "text"}};

// Throws std::runtime_error naming the file when it cannot serve `vocab_size` and
// `sample_length` (too short, an id outside the vocabulary, a size not a multiple of
// the id width).
std::unique_ptr<TokenSource> OpenTokenFile(const std::filesystem::path& path,
                                           TokenFileFormat format, int64_t vocab_size,
                                           int64_t sample_length);

}  // namespace headroom
