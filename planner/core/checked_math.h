// Size arithmetic that cannot wrap. Bytes, elements and counts derived from user input
// go through these: an overflow is a SizeOverflow (a clear "too large" error at the
// command's edge), never a wrapped number that would report a wrong FITS.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace headroom {

// Thrown when a size does not fit in 63 bits. Bounds checked up front (limits.h) keep
// real requests far below this; it is the backstop for any path they miss.
class SizeOverflow : public std::overflow_error {
 public:
  explicit SizeOverflow(const std::string& what)
      : std::overflow_error("too large to plan: " + what + " exceeds 2^63 bytes or elements") {}
};

inline int64_t CheckedMul(int64_t a, int64_t b, const char* what = "a size") {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) throw SizeOverflow(what);
  return out;
}

inline int64_t CheckedAdd(int64_t a, int64_t b, const char* what = "a size") {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) throw SizeOverflow(what);
  return out;
}

}  // namespace headroom
