// Element types of tensors the planner reasons about, and their storage sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace headroom {

enum class DType { kF32, kF16, kBF16, kI64, kBool, kU8, kNF4 };

// Bytes taken by `numel` elements; NF4 packs two elements per byte (rounded up).
int64_t StorageBytes(DType dtype, int64_t numel);
std::string_view DTypeName(DType dtype);
std::optional<DType> ParseDType(std::string_view name);
bool IsFloatingPoint(DType dtype);

// The dtype of a + b under PyTorch type promotion for the float types we use.
DType PromoteTypes(DType a, DType b);

}  // namespace headroom
