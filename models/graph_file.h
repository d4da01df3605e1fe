// The graph file `headroom import` writes (docs/graph-file.md): a model's training
// micro-batch recorded from its own transformers code, read without Python or LibTorch
// and expanded to the model's depth as an OpGraph of traced ops.
#pragma once

#include "models/layer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/layer_builder.h"
#include "planner/core/result.h"
#include "planner/graph/op_graph.h"

namespace headroom {

// What the recording ran: a plan is expanded from it only when it runs the same.
struct TraceRegime {
  std::string device = "cpu";
  // On cuda: the GPU's compute capability, 10 x major + minor, which picks the SDPA kernel
  // the recording ran (0 on cpu).
  int64_t sm = 0;
  std::string precision = "fp32";
  std::string mode = "full";  // full, lora
  int64_t lora_rank = 0;      // alpha only scales by a Python float: the same program
  std::vector<std::string> lora_targets;
  std::string attention = "sdpa";
  std::string stack = "pytorch";
  bool kv_cache = true;
  std::string base_dtype;  // LoRA's frozen base as loaded; empty: the precision's
  // Traced from this sequence length on: the sliding window or attention chunk a plan's
  // sequence reaches, past which transformers builds other masks (0: none reached).
  int64_t min_seq_len = 0;
  // Traced at multiples of this chunk (0: at lengths that are not): Mamba-2's reference
  // code slices its padded output only when the sequence is no whole number of chunks.
  int64_t seq_multiple = 0;
  // Images per sample, their tokens counted in the sequence (image_inputs.py).
  int64_t images = 0;
  // Kernel packages bound in place of transformers' reference code (kKernelPackages).
  std::vector<std::string> kernels;
  bool operator==(const TraceRegime&) const = default;
};

// The compute capability standing for every GPU whose SDPA kernels PyTorch picks alike.
int64_t SdpaCapabilityClass(double compute_capability);
// The regime a plan's graph options ask for.
TraceRegime TraceRegimeOf(const GraphOptions& options);
// One line, for messages: "bf16, lora r8 (q_proj, v_proj), sdpa, KV cache".
std::string DescribeRegime(const TraceRegime& regime);

// A tensor or op reference from inside a section. kLayer: tensor `index` of the latest
// layer expanded from template `layer_kind` (Gemma 4's KV-shared layers read the K/V the
// last layer of their type before them stored).
struct SectionRef {
  enum class Kind { kLocal, kInput, kShared, kLayer };
  Kind kind = Kind::kLocal;
  int index = 0;
  std::string layer_kind;
  bool operator==(const SectionRef&) const = default;
};

struct ImportedTensor {
  std::string name;
  TensorRole role = TensorRole::kActivation;
  SymShape shape;
  DType dtype = DType::kF32;
  bool trainable = false;
  bool lora = false;
  std::optional<SectionRef> alias_of;
};

struct ImportedOp {
  std::string name;  // "<module>/<aten op>", the module relative to its layer in a template
  std::vector<SectionRef> inputs;
  std::vector<int> outputs;  // local tensor indices
  std::shared_ptr<const TracedOp> traced;
};

// A Python loop over the sequence's chunks (the gated delta rule's reference scan), rolled
// up by the import (loop_roll.py): ops [first_op - ops, first_op) are its first
// iteration, [first_op, first_op + ops) a middle one, which runs `iterations` - 2 times,
// and the next `ops` its last.
struct ImportedLoop {
  int first_op = 0;
  int ops = 0;
  Dim iterations;  // chunks(s,M)
};

struct ImportedSection {
  std::vector<ImportedTensor> tensors;
  std::vector<ImportedOp> ops;
  std::vector<ImportedLoop> loops;  // in op order, not overlapping
  int output = -1;
  std::vector<std::pair<SectionRef, int>> holds;  // tensor, until op (local)
  std::vector<SectionRef> held_until_forward_end;
  // A layer template's tensors (local) the layer writes into a Python object among its
  // arguments (Gemma 4's K/V in shared_kv_states): BlockSegment::kept_by_arguments.
  std::vector<int> kept_by_arguments;
  int loss = -1;
  int input_embeddings = -1;
};

// The prologue, the layer templates and the epilogue of one program.
struct ImportedProgram {
  ImportedSection prologue;
  std::map<std::string, ImportedSection> templates;
  ImportedSection epilogue;
};

struct ImportedGraph {
  std::string model_type;
  std::string name;
  std::string transformers_version;
  std::string config_sha256;
  TraceRegime regime;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0, num_heads = 0, max_positions = 0;
  int64_t min_seq_len = 0, max_seq_len = 0;  // valid_seq_len; max 0: no bound known
  // The chunk Mamba-2's scan or a rolled loop splits the sequence into (0: none); see
  // TraceRegime::seq_multiple.
  int64_t sequence_chunk = 0;
  std::string layer_prefix;
  std::vector<std::string> layer_types;  // one template name per layer
  // The code paths the import planned where a GPU install may run other kernels
  // (models/import/kernel_paths.py), one line each; the plan prints them.
  std::vector<std::string> assumptions;
  ImportedProgram program;
  std::optional<ImportedProgram> micro_batch_1;  // the program at a micro-batch of one
};

// Parses and checks a graph file; errors name `origin` and what is wrong.
Result<ImportedGraph> ParseImportedGraph(std::string_view text, std::string_view origin);

// The full-depth graph of one micro-batch, when `options` run what the file recorded.
// An imported graph's products are recorded ops without oneDNN's scratch: on the CPU,
// 16-bit plans are made for ATen's gemm only (--cpu-bf16 aten), refused under the others.
Result<bool> CheckImportedCpuKernel(std::string_view model_type, const GraphOptions& options);
// How a graph file is expanded. Both shortcuts replay the same step as the graph without
// them; only the checks that they do turn them off.
struct ExpandChoices {
  bool fold_views = true;  // plain views read through (models/view_folding.h)
  // A rolled loop of more than four iterations is expanded with its middle iteration
  // twice, the first standing for all but one of them (RepeatedOps), not once per chunk.
  bool hold_repetitions_once = true;
};
Result<OpGraph> ExpandImportedGraph(const ImportedGraph& imported, const GraphOptions& options,
                                    const ExpandChoices& choices = {});

}  // namespace headroom
