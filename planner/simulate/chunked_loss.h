// The memory of TRL 1.16's fused LM head (--loss chunked): trl/trainer/utils.py
// add_fused_lm_head, as SFTTrainer adds it (outputs log_probs, entropy and is_top1), calling
// trl/kernels/chunked_logprob.py ChunkedLogProbFunction. The logits are never whole: the
// forward projects [4096 tokens, vocab_tile] tiles into one buffer and folds each into
// online log-sum-exp statistics; the backward projects each tile again, turns it into the
// logits' gradient in place and accumulates the gradient products in fp32.
//
// What one call holds depends on min(tokens, 4096), not in proportion to the micro-batch,
// so the simulator asks for it at the micro-batch it runs (as for oneDNN's scratch).
// docs/memory-model.md gives the derivation; tests/reference measures it against TRL.
#pragma once

#include "planner/simulate/layer.h"

#include <cstdint>
#include <optional>

#include "planner/core/dtype.h"
#include "planner/core/training_stack.h"

namespace headroom {

struct ChunkedLossCall {
  int64_t seq_len = 0;  // s: the backbone's output is [b, s, hidden]; s - 1 are scored
  int64_t hidden = 0;
  int64_t vocab = 0;
  int64_t vocab_tile = 0;  // TRL's chunk_size: the tile buffer is this wide whatever the vocab
  DType hidden_dtype = DType::kF32;   // the backbone's last hidden state
  DType weight_dtype = DType::kF32;   // lm_head.weight as stored
  DType compute_dtype = DType::kF32;  // autocast's dtype, else the hidden state's
  bool softcap = false;               // final_logit_softcapping (Gemma 2)
  bool hidden_grad = false;           // the hidden state requires grad
  bool weight_grad = false;           // lm_head.weight is trained
  // CUDA: Triton kernels fold each tile in registers and the gradient products accumulate
  // in fp32 inside cuBLAS, and only the labelled positions are scored (`compact`: a copy of
  // their hidden states). The CPU folds each tile with torch ops on fp32 copies of it.
  bool triton = false;
  // The CPU kernel of the tiles' 16-bit products, whose scratch sits beside them.
  std::optional<CpuBf16> cpu_bf16;
  int cpu_threads = 1;

  bool valid() const { return seq_len > 0; }
  // The most the forward holds at once besides its input and what it saves: the tile
  // buffer, the fold's fp32 copies of a tile, the running statistics and the outputs.
  int64_t ForwardTransientBytes(int64_t micro_batch) const;
  // What autograd saves for the backward besides the hidden state: the targets, log Z and
  // the entropy, and the masks of the two masked_fill outputs that carry gradients.
  int64_t ForwardSavedBytes(int64_t micro_batch) const;
  // The backward's own peak: the fp32 gradient accumulators, the tile buffer and a
  // tile's fold or its fp32 products, or the gradients cast back at the end.
  int64_t BackwardPeakBytes(int64_t micro_batch) const;
  // The gradient of the flattened hidden state the function returns ([b * (s - 1),
  // hidden], cast back to the hidden state's dtype), alive while the slice's backward
  // makes the [b, s, hidden] gradient.
  int64_t ReturnedHiddenGradBytes(int64_t micro_batch) const;
  // What the simulator holds beside the gradients it makes for this op (the hidden
  // state's [b, s, hidden] and lm_head.weight's): the backward's peak less those, and at
  // least the returned gradient the slice's backward reads. Its peak is then the larger of
  // the function's own and the slice backward's.
  int64_t BackwardWorkspaceBytes(int64_t micro_batch) const;
};

}  // namespace headroom
