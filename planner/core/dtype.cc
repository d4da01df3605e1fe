#include "planner/core/dtype.h"

#include <stdexcept>

namespace headroom {

int64_t StorageBytes(DType dtype, int64_t numel) {
  switch (dtype) {
    case DType::kF32:
      return 4 * numel;
    case DType::kF16:
    case DType::kBF16:
      return 2 * numel;
    case DType::kI64:
      return 8 * numel;
    case DType::kBool:
    case DType::kU8:
      return numel;
    case DType::kNF4:
      return (numel + 1) / 2;
  }
  throw std::logic_error("StorageBytes: unknown dtype");
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "fp32";
    case DType::kF16:
      return "fp16";
    case DType::kBF16:
      return "bf16";
    case DType::kI64:
      return "int64";
    case DType::kBool:
      return "bool";
    case DType::kU8:
      return "uint8";
    case DType::kNF4:
      return "nf4";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  if (name == "fp32" || name == "float32") return DType::kF32;
  if (name == "fp16" || name == "float16") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  return std::nullopt;
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kF32 || b == DType::kF32) return DType::kF32;
  // fp16 + bf16 promotes to fp32 in PyTorch.
  if (IsFloatingPoint(a) && IsFloatingPoint(b)) return DType::kF32;
  return IsFloatingPoint(a) ? a : b;
}

}  // namespace headroom
