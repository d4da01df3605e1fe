#include "runtime/dropout_kernel.h"

#include <cstring>

namespace headroom {

void ScaleUnlessDroppedF32(float* __restrict out, const float* __restrict in,
                           const bool* __restrict dropped, float scale, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    // A bit mask instead of a branch, so that the loop vectorizes; a dropped element's
    // bits are cleared: exactly +0 whatever the input (as masked_fill_ gives).
    const float scaled = in[i] * scale;
    uint32_t bits;
    std::memcpy(&bits, &scaled, sizeof bits);
    bits &= static_cast<uint32_t>(dropped[i]) - 1u;
    std::memcpy(&out[i], &bits, sizeof bits);
  }
}

}  // namespace headroom
