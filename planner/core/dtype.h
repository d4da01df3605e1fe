// Element types of tensors the planner reasons about, and their storage sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "planner/core/enum_table.h"

namespace headroom {

// kC64: complex64 (two fp32), which Llama 4's rotary embedding multiplies in.
// kU64: the philox seed and offset PyTorch's flash attention returns on CUDA.
enum class DType { kF32, kF16, kBF16, kI64, kI32, kBool, kU8, kNF4, kC64, kU64 };

// Bytes taken by `numel` elements; NF4 packs two elements per byte (rounded up).
int64_t StorageBytes(DType dtype, int64_t numel);
// Names as headroom writes them, then the ones torch and config.json use.
inline constexpr EnumName<DType> kDTypeNames[] = {
    {DType::kF32, "fp32"},      {DType::kF16, "fp16"},    {DType::kBF16, "bf16"},
    {DType::kI64, "int64"},     {DType::kI32, "int32"},   {DType::kBool, "bool"},
    {DType::kU8, "uint8"},      {DType::kU64, "uint64"},  {DType::kNF4, "nf4"},
    {DType::kC64, "complex64"}, {DType::kF32, "float32"}, {DType::kF16, "float16"},
    {DType::kBF16, "bfloat16"}};
inline std::string_view DTypeName(DType dtype) { return NameIn(kDTypeNames, dtype); }
// A floating-point dtype a model may be loaded in: fp32, fp16 or bf16 (or torch's names).
std::optional<DType> ParseDType(std::string_view name);
bool IsFloatingPoint(DType dtype);
// Autograd tracks floating-point and complex tensors (requires_grad on an integer is an error).
bool IsDifferentiable(DType dtype);

// The dtype of a + b under PyTorch type promotion for the float types we use.
DType PromoteTypes(DType a, DType b);

}  // namespace headroom
