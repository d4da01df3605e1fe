#include "runtime/torch_dtypes.h"

#include <stdexcept>

namespace headroom {

c10::ScalarType ToScalarType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return c10::kFloat;
    case DType::kF16:
      return c10::kHalf;
    case DType::kBF16:
      return c10::kBFloat16;
    case DType::kI64:
      return c10::kLong;
    case DType::kI32:
      return c10::kInt;
    case DType::kBool:
      return c10::kBool;
    case DType::kU8:
      return c10::kByte;
    case DType::kC64:
      return c10::kComplexFloat;
    case DType::kU64:
      return c10::kUInt64;
    case DType::kNF4:
      break;
  }
  throw std::invalid_argument("NF4 (QLoRA) weights cannot be executed by the LibTorch runtime");
}

}  // namespace headroom
