// The model's parameters as LibTorch tensors, one per parameter of the OpGraph, in the
// dtype the precision regime stores them in and requiring grad when trainable.
// Initialization is seeded and deterministic: weights ~ N(0, 0.02), norm weights 1,
// biases 0, LoRA B 0 (PEFT's default, so training starts from the base model).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "planner/graph/op_graph.h"
#include "planner/simulate/tensor_states.h"

namespace headroom {

class ParameterStore {
 public:
  ParameterStore(const OpGraph& graph, const TensorStates& states, uint64_t seed,
                 c10::Device device = c10::Device(c10::DeviceType::CPU));

  const at::Tensor& operator[](TensorId id) const { return tensors_.at(id.value); }
  c10::Device device() const { return device_; }
  // Trainable parameters in graph order (what the optimizer updates).
  std::vector<at::Tensor> Trainable() const;
  // Every parameter with its Hugging Face name, in graph order; tied weights once.
  std::vector<std::pair<std::string, at::Tensor>> Named() const;

 private:
  const OpGraph& graph_;
  c10::Device device_;
  std::vector<at::Tensor> tensors_;  // by tensor id; undefined for non-parameters
};

}  // namespace headroom
