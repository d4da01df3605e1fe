#include "planner/core/dtype.h"

#include <stdexcept>

#include "planner/core/checked_math.h"

namespace headroom {

int64_t StorageBytes(DType dtype, int64_t numel) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return CheckedMul(4, numel, "a tensor's bytes");
    case DType::kF16:
    case DType::kBF16:
      return CheckedMul(2, numel, "a tensor's bytes");
    case DType::kI64:
    case DType::kU64:
    case DType::kC64:
      return CheckedMul(8, numel, "a tensor's bytes");
    case DType::kBool:
    case DType::kU8:
      return numel;
    case DType::kNF4:
      return numel / 2 + numel % 2;
  }
  throw std::logic_error("StorageBytes: unknown dtype");
}

std::optional<DType> ParseDType(std::string_view name) {
  const Result<DType> dtype = ParseIn(kDTypeNames, name, "dtype");
  if (!dtype || !IsFloatingPoint(*dtype)) return std::nullopt;
  return *dtype;
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

bool IsDifferentiable(DType dtype) { return IsFloatingPoint(dtype) || dtype == DType::kC64; }

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kF32 || b == DType::kF32) return DType::kF32;
  // fp16 + bf16 promotes to fp32 in PyTorch.
  if (IsFloatingPoint(a) && IsFloatingPoint(b)) return DType::kF32;
  return IsFloatingPoint(a) ? a : b;
}

}  // namespace headroom
