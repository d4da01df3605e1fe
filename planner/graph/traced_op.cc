#include "planner/graph/traced_op.h"

#include <cmath>

#include "planner/core/checked_math.h"

namespace headroom {
namespace {

SymSize TermsWithBatchPower(const SymSize& size, int b_pow) {
  SymSize out;
  for (const Monomial& m : size.terms) {
    if (m.b_pow == b_pow) out.terms.push_back(m);
  }
  return out;
}

// x^n for the small powers of b and s a graph file allows (b^0..1, s^0..2): exact where the
// result is an integer below 2^53, as std::pow's is, at a fraction of its cost.
double IntPow(double x, int n) {
  double r = 1;
  for (int i = 0; i < n; ++i) r *= x;
  return r;
}

}  // namespace

double SymSize::Evaluate(const ShapeEnv& env) const {
  const double b = static_cast<double>(env.micro_batch);
  double sum = 0;
  for (const Monomial& m : terms) {
    const double x = static_cast<double>(SizeIn(m.seq, env));
    sum += m.c * IntPow(b, m.b_pow) * IntPow(x, m.s_pow);
  }
  return sum;
}

int64_t SymSize::Bytes(const ShapeEnv& env) const {
  constexpr double kMaxBytes = 4.611686018427387904e18;  // 2^62
  const double bytes = std::ceil(Evaluate(env));
  if (!(bytes <= kMaxBytes)) throw SizeOverflow("an imported op's bytes");
  return static_cast<int64_t>(bytes);
}

SymSize SymSize::PerSample() const { return TermsWithBatchPower(*this, 1); }
SymSize SymSize::Fixed() const { return TermsWithBatchPower(*this, 0); }

}  // namespace headroom
