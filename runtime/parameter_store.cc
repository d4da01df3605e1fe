#include "runtime/parameter_store.h"

#include <torch/torch.h>

#include "runtime/torch_dtypes.h"

namespace headroom {
ParameterStore::ParameterStore(const OpGraph& graph, const TensorStates& states, uint64_t seed,
                               c10::Device device)
    : graph_(graph), device_(device), tensors_(graph.num_tensors()) {
  torch::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (TensorId p : graph.Parameters()) {
    const TensorInfo& info = graph.tensor(p);
    std::vector<int64_t> sizes;
    for (const Dim& d : info.shape.dims()) sizes.push_back(d.value);
    // Initialize in fp32 on the CPU with our own generator (identical across devices and
    // precisions), then convert.
    at::Tensor t;
    if (sizes.size() == 1) {
      t = info.name.ends_with("bias") ? torch::zeros(sizes) : torch::ones(sizes);
    } else if (info.name.ends_with("lora_B.weight")) {
      t = torch::zeros(sizes);
    } else {
      t = at::normal(0.0, 0.02, sizes, generator);
    }
    t = t.to(device, ToScalarType(states[p].dtype));
    t.set_requires_grad(states[p].requires_grad);
    tensors_[p.value] = t;
  }
}

std::vector<at::Tensor> ParameterStore::Trainable() const {
  std::vector<at::Tensor> out;
  for (TensorId p : graph_.Parameters()) {
    if (tensors_[p.value].requires_grad()) out.push_back(tensors_[p.value]);
  }
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> ParameterStore::Named() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (TensorId p : graph_.Parameters()) out.emplace_back(graph_.tensor(p).name, tensors_[p.value]);
  return out;
}

}  // namespace headroom
