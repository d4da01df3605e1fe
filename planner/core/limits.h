// How large a request headroom plans. Each bound is far above any real model (Llama 3.1
// 405B: 126 layers, hidden 16384, 128 heads, vocab 128256, 131072 positions) and low
// enough that the planner's work stays bounded and its sizes stay far from 2^63: a
// request past one is bad input with a message naming the field, not a wrapped size.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "planner/core/result.h"

namespace headroom::limits {

inline constexpr int64_t kMaxLayers = 4096;
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;      // hidden, head_dim, MLP width
inline constexpr int64_t kMaxHeads = int64_t{1} << 16;      // query and key/value heads
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;      // also labels, token types
inline constexpr int64_t kMaxPositions = int64_t{1} << 24;  // also the sequence length
inline constexpr int64_t kMaxBatch = int64_t{1} << 20;      // micro, global, accumulation
inline constexpr int64_t kMaxLoraRank = int64_t{1} << 16;
inline constexpr int64_t kMaxImagesPerSample = 1024;
// --loss chunked:N: a tile's vocabulary entries (the largest vocabularies are about 2^18).
inline constexpr int64_t kMaxVocabTile = int64_t{1} << 24;
inline constexpr int64_t kMaxGpus = 65536;  // data-parallel ranks
inline constexpr int64_t kMaxSteps = 1'000'000'000;
// The most bytes one training step may need: 2^62 leaves headroom for the sums of them.
inline constexpr double kMaxStepBytes = 4.611686018427387904e18;

// Error unless lo <= value <= hi, naming `what` (a flag or field).
std::optional<Error> CheckRange(int64_t value, int64_t lo, int64_t hi, std::string_view what);

}  // namespace headroom::limits
