// Turns samples of a TokenSource into the graph's inputs for one micro-batch: token
// ids, labels (the next token for language models; for BERT's classifier, the parity
// of the first token, a label the synthetic task makes learnable), position and
// token-type ids.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/Tensor.h>

#include "models/model_spec.h"
#include "planner/graph/op_graph.h"
#include "runtime/token_source.h"

namespace headroom {

class BatchBuilder {
 public:
  BatchBuilder(const OpGraph& graph, const ModelSpec& spec, int64_t seq_len,
               const TokenSource& source);

  // Tokens per sample drawn from the source (one more than the sequence: the last label).
  int64_t sample_length() const { return seq_len_ + 1; }
  // Samples [first, first + count) as inputs indexed by tensor id (undefined for non-inputs).
  std::vector<at::Tensor> Inputs(int64_t first, int64_t count) const;

 private:
  const OpGraph& graph_;
  const ModelSpec& spec_;
  int64_t seq_len_;
  const TokenSource& source_;
};

}  // namespace headroom
