// Tensor shapes symbolic in micro-batch `b` and sequence length `s`: every dimension
// is a constant, b, s, or s + N (an imported graph's labels padded by one), so a shape's
// element count is c * b^i * s^j times its (s + N) factors.
#pragma once

#include "planner/graph/layer.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace headroom {

struct Dim {
  // kSeqRoundUp: s rounded up to a multiple of M, plus N (a kernel that pads, e.g. the
  // memory-efficient attention's logsumexp to 32); kSeqChunks: the number of M-token
  // chunks s is split into, ceil(s / M), plus N (Mamba-2's reference code pads the
  // sequence to whole chunks and keeps a state per chunk plus the initial one).
  enum class Kind { kConst, kBatch, kSeq, kSeqPlus, kSeqRoundUp, kSeqChunks };
  Kind kind = Kind::kConst;
  int64_t value = 1;  // kConst: the size; kSeqPlus: N; kSeqRoundUp, kSeqChunks: M
  int64_t plus = 0;   // kSeqRoundUp, kSeqChunks: N

  static Dim C(int64_t v) { return {Kind::kConst, v}; }
  static Dim B() { return {Kind::kBatch, 1}; }
  static Dim S() { return {Kind::kSeq, 1}; }
  static Dim SPlus(int64_t n) { return {Kind::kSeqPlus, n}; }
  static Dim SRoundUp(int64_t m, int64_t n = 0) { return {Kind::kSeqRoundUp, m, n}; }
  static Dim SChunks(int64_t m, int64_t n = 0) { return {Kind::kSeqChunks, m, n}; }
  bool operator==(const Dim&) const = default;
};

// The concrete sizes a symbolic shape is evaluated at.
struct ShapeEnv {
  int64_t micro_batch = 1;
  int64_t seq_len = 1;
};

// The size of one dimension in `env`.
int64_t SizeIn(const Dim& d, const ShapeEnv& env);

class SymShape {
 public:
  SymShape() = default;
  SymShape(std::initializer_list<Dim> dims) : dims_(dims) {}
  explicit SymShape(std::vector<Dim> dims) : dims_(std::move(dims)) {}

  const std::vector<Dim>& dims() const { return dims_; }
  // Throws SizeOverflow past 2^63; NumelBound cannot overflow, for size checks.
  int64_t Numel(const ShapeEnv& env) const;
  double NumelBound(const ShapeEnv& env) const;
  // True when the shape does not depend on b or s (parameters, buffers).
  bool IsStatic() const;
  // True when the element count is proportional to the micro-batch (one dimension b).
  bool ScalesWithBatch() const;
  // True when both shapes have the same element count at every (b, s): the same
  // constant factor, powers of b and s, and s + N factors. (Equal counts at one (b, s) can be a
  // coincidence: [s, n] and [b, s, n] at b = 1.)
  bool SameNumel(const SymShape& other) const;
  std::string ToString() const;  // e.g. "[b, s, 4096]"

 private:
  std::vector<Dim> dims_;
};

}  // namespace headroom
