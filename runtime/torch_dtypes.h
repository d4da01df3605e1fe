// The planner's dtypes as LibTorch scalar types.
#pragma once

#include <c10/core/ScalarType.h>

#include "planner/core/dtype.h"

namespace headroom {

// NF4 has no LibTorch type: QLoRA is planned, not executed; throws std::invalid_argument.
c10::ScalarType ToScalarType(DType dtype);

}  // namespace headroom
