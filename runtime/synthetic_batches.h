// Training data for the executor: a learnable synthetic task, deterministic in the seed.
// Language models see runs of consecutive token ids and predict the next one; BERT
// classifies a sequence by the parity of its first token. Every input of the graph
// (ids, labels, position and token-type ids) gets a tensor.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/Tensor.h>

#include "models/model_spec.h"
#include "planner/op_graph.h"
#include "planner/training_config.h"

namespace headroom {

class SyntheticBatches {
 public:
  SyntheticBatches(const OpGraph& graph, const ModelSpec& spec, const TrainingConfig& config,
                   uint64_t seed);

  // One micro-batch, indexed by tensor id (undefined for non-inputs).
  std::vector<at::Tensor> Next();

 private:
  const OpGraph& graph_;
  const ModelSpec& spec_;
  TrainingConfig config_;
  at::Generator generator_;
};

}  // namespace headroom
