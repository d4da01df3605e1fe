// The CPU loop of headroom's dropout for fp32, in its own file so that it is compiled
// with -O3 (GCC vectorizes it there, not at -O2) and without LibTorch's headers.
#pragma once

#include <cstdint>

namespace headroom {

// out[i] = dropped[i] ? +0 : in[i] * scale, for n contiguous elements.
void ScaleUnlessDroppedF32(float* out, const float* in, const bool* dropped, float scale,
                           int64_t n);

}  // namespace headroom
