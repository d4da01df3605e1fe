#include "planner/graph/sym_shape.h"

#include <set>
#include <tuple>
#include <utility>

#include "planner/core/checked_math.h"

namespace headroom {

int64_t SizeIn(const Dim& d, const ShapeEnv& env) {
  switch (d.kind) {
    case Dim::Kind::kConst:
      return d.value;
    case Dim::Kind::kBatch:
      return env.micro_batch;
    case Dim::Kind::kSeq:
      return env.seq_len;
    case Dim::Kind::kSeqPlus:
      return CheckedAdd(env.seq_len, d.value, "a dimension s + N");
    case Dim::Kind::kSeqRoundUp:
      return CheckedAdd(
          CheckedAdd(env.seq_len, d.value - 1, "a dimension s rounded up") / d.value * d.value,
          d.plus, "a dimension s rounded up");
    case Dim::Kind::kSeqChunks:
      return CheckedAdd(
          CheckedAdd(env.seq_len, d.value - 1, "a dimension of chunks of s") / d.value, d.plus,
          "a dimension of chunks of s");
  }
  return d.value;
}

int64_t SymShape::Numel(const ShapeEnv& env) const {
  int64_t n = 1;
  for (const Dim& d : dims_) n = CheckedMul(n, SizeIn(d, env), "a tensor's element count");
  return n;
}

double SymShape::NumelBound(const ShapeEnv& env) const {
  double n = 1;
  for (const Dim& d : dims_) n *= static_cast<double>(SizeIn(d, env));
  return n;
}

bool SymShape::IsStatic() const {
  for (const Dim& d : dims_) {
    if (d.kind != Dim::Kind::kConst) return false;
  }
  return true;
}

bool SymShape::ScalesWithBatch() const {
  int batch_dims = 0;
  for (const Dim& d : dims_) batch_dims += d.kind == Dim::Kind::kBatch ? 1 : 0;
  return batch_dims == 1;
}

bool SymShape::SameNumel(const SymShape& other) const {
  const auto powers = [](const SymShape& shape) {
    struct {
      int64_t constant = 1;
      int batch = 0, seq = 0;
      std::multiset<int64_t> seq_plus;
      std::multiset<std::pair<int64_t, int64_t>> seq_round_up, seq_chunks;
    } p;
    for (const Dim& d : shape.dims_) {
      if (d.kind == Dim::Kind::kConst) p.constant *= d.value;
      if (d.kind == Dim::Kind::kSeqPlus) p.seq_plus.insert(d.value);
      if (d.kind == Dim::Kind::kSeqRoundUp) p.seq_round_up.emplace(d.value, d.plus);
      if (d.kind == Dim::Kind::kSeqChunks) p.seq_chunks.emplace(d.value, d.plus);
      p.batch += d.kind == Dim::Kind::kBatch ? 1 : 0;
      p.seq += d.kind == Dim::Kind::kSeq ? 1 : 0;
    }
    return std::tuple(p.constant, p.batch, p.seq, p.seq_plus, p.seq_round_up, p.seq_chunks);
  };
  return powers(*this) == powers(other);
}

namespace {
std::string PlusText(int64_t n) { return n ? "+" + std::to_string(n) : ""; }
}  // namespace

std::string SymShape::ToString() const {
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) out += ", ";
    switch (dims_[i].kind) {
      case Dim::Kind::kConst:
        out += std::to_string(dims_[i].value);
        break;
      case Dim::Kind::kBatch:
        out += "b";
        break;
      case Dim::Kind::kSeq:
        out += "s";
        break;
      case Dim::Kind::kSeqPlus:
        out += "s+" + std::to_string(dims_[i].value);
        break;
      case Dim::Kind::kSeqRoundUp:
        out += "round_up(s," + std::to_string(dims_[i].value) + ")" + PlusText(dims_[i].plus);
        break;
      case Dim::Kind::kSeqChunks:
        out += "chunks(s," + std::to_string(dims_[i].value) + ")" + PlusText(dims_[i].plus);
        break;
    }
  }
  return out + "]";
}

}  // namespace headroom
