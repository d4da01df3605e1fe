#include "runtime/synthetic_batches.h"

#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace headroom {

SyntheticBatches::SyntheticBatches(const OpGraph& graph, const ModelSpec& spec,
                                   const TrainingConfig& config, uint64_t seed)
    : graph_(graph),
      spec_(spec),
      config_(config),
      generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

std::vector<at::Tensor> SyntheticBatches::Next() {
  const int64_t b = config_.micro_batch, s = config_.seq_len, v = spec_.vocab_size;
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  // ids[i][j] = (start_i + j) mod vocab: the next token is always the current one + 1.
  const at::Tensor start = at::randint(v, {b, 1}, generator_, i64);
  at::Tensor ids = (start + at::arange(s, i64)).remainder_(v);
  std::vector<at::Tensor> out(graph_.num_tensors());
  for (int t = 0; t < graph_.num_tensors(); ++t) {
    const TensorInfo& info = graph_.tensor(TensorId{t});
    if (info.role != TensorRole::kInput) continue;
    if (info.name == "input_ids") {
      out[t] = ids;
    } else if (info.name == "labels") {
      out[t] = info.shape.dims().size() == 1 ? ids.select(1, 0).remainder(spec_.num_labels)
                                             : (ids + 1).remainder_(v);
    } else if (info.name == "position_ids") {
      out[t] = at::arange(s, i64).unsqueeze(0);
    } else if (info.name == "token_type_ids") {
      out[t] = at::zeros({b, s}, i64);
    } else {
      throw std::logic_error("synthetic data: no generator for input " + info.name);
    }
  }
  return out;
}

}  // namespace headroom
