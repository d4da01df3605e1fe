#include "runtime/batch_builder.h"

#include <stdexcept>

#include <torch/torch.h>

namespace headroom {

BatchBuilder::BatchBuilder(const OpGraph& graph, const ModelSpec& spec, int64_t seq_len,
                           const TokenSource& source)
    : graph_(graph), spec_(spec), seq_len_(seq_len), source_(source) {}

std::vector<at::Tensor> BatchBuilder::Inputs(int64_t first, int64_t count) const {
  std::vector<at::Tensor> samples;
  for (int64_t i = 0; i < count; ++i) samples.push_back(source_.Sample(first + i, sample_length()));
  const at::Tensor tokens = torch::stack(samples);  // [count, seq + 1]
  const at::Tensor ids = tokens.slice(1, 0, seq_len_).contiguous();
  std::vector<at::Tensor> out(graph_.num_tensors());
  for (int t = 0; t < graph_.num_tensors(); ++t) {
    const TensorInfo& info = graph_.tensor(TensorId{t});
    if (info.role != TensorRole::kInput) continue;
    if (info.name == "input_ids") {
      out[t] = ids;
    } else if (info.name == "labels") {
      out[t] = info.shape.dims().size() == 1 ? ids.select(1, 0).remainder(spec_.num_labels)
                                             : tokens.slice(1, 1, seq_len_ + 1).contiguous();
    } else if (info.name == "position_ids") {
      out[t] = torch::arange(seq_len_, torch::kLong).unsqueeze(0);
    } else if (info.name == "token_type_ids") {
      out[t] = torch::zeros({count, seq_len_}, torch::kLong);
    } else {
      throw std::logic_error("no data for the graph input " + info.name);
    }
  }
  return out;
}

}  // namespace headroom
