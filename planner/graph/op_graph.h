// OpGraph: the single description of a model's training computation — ops and the
// tensors between them, in the order PyTorch eager runs the forward pass. Shapes are
// symbolic in micro-batch b and sequence length s; transformer blocks are marked as
// checkpointable segments. The simulator and the LibTorch executor both walk it.
//
//   OpGraph g;
//   TensorId x = g.AddTensor({.name = "x", .shape = {Dim::B(), Dim::S(), Dim::C(64)}});
//   TensorId w = g.AddParameter("w", {Dim::C(64), Dim::C(64)}, ParamOptions{});
//   TensorId y = g.AddOp({.kind = OpKind::kLinear, .name = "fc", .inputs = {x, w}},
//                        {{.name = "y", .shape = {Dim::B(), Dim::S(), Dim::C(64)}}})[0];
#pragma once

#include "planner/graph/layer.h"

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "planner/core/attention_kernel.h"
#include "planner/core/dtype.h"
#include "planner/graph/op_kinds.h"
#include "planner/graph/sym_shape.h"
#include "planner/graph/traced_op.h"

namespace headroom {

template <typename Tag>
struct StrongId {
  int32_t value = -1;
  bool valid() const { return value >= 0; }
  auto operator<=>(const StrongId&) const = default;
};
using TensorId = StrongId<struct TensorTag>;
using OpId = StrongId<struct OpTag>;

enum class TensorRole {
  kInput,       // per-micro-batch data: token ids, labels (allocated with the batch)
  kParameter,   // model weights; persistent
  kActivation,  // produced by an op
  kBuffer,      // a model buffer (position ids): persistent, not a parameter
};

// Rotary position embedding: the base, and Llama 3.1's frequency scaling ("llama3" in
// transformers' rope_scaling) when `llama3_factor` > 0.
struct RopeParams {
  double theta = 10000.0;
  double linear_factor = 0.0;  // "linear" scaling (Gemma 3's global layers): positions / factor
  double llama3_factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_positions = 8192;
  bool operator==(const RopeParams&) const = default;
};

struct ParamOptions {
  bool trainable = true;      // receives a gradient and optimizer states
  bool quantized = false;     // stored as 4-bit NF4 (QLoRA base linear weights)
  bool lora_adapter = false;  // LoRA A/B matrices (their dtype policy differs)
};

struct TensorInfo {
  std::string name;
  SymShape shape;
  TensorRole role = TensorRole::kActivation;
  std::optional<DType> fixed_dtype;  // ids, labels, masks; otherwise set by precision
  ParamOptions param;                // meaningful for kParameter
  std::optional<TensorId> alias_of;  // views share the storage of their base
  OpId producer;                     // invalid for inputs and parameters
  int block = -1;                    // transformer block index, -1 outside blocks
};

struct OpNode {
  OpKind kind = OpKind::kView;
  std::string name;
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  int block = -1;
  double dropout_p = 0.0;                                      // kDropout
  bool causal = false;                                         // kSdpa
  AttentionKernel attention_kernel = AttentionKernel::kFlash;  // kSdpa: the backend that runs
  // kSdpa: q is a contiguous [b, heads, s, d] tensor (Phi-3's rotary ends in torch.cat)
  // rather than a transposed view of a [b, s, heads * d] projection.
  bool contiguous_query = false;
  double scalar = 1.0;  // kScale: the factor; kAddScalar: the addend
  double eps = 0.0;     // kLayerNorm, kRmsNorm
  // kView of one slice of a fused projection (Phi-3's qkv_proj): the slice's first
  // feature in the input's last dimension.
  int64_t slice_begin = 0;
  // kAttnScores, kSdpa: the softmax scale; 0 is 1 / sqrt(head_dim) (Gemma: 1 / sqrt of
  // query_pre_attn_scalar).
  double attention_scale = 0.0;
  // kCausalMask, kWindowMask: a sliding-window mask (a position sees this many tokens,
  // itself included); 0: causal.
  int64_t sliding_window = 0;
  // kGatherRows: the rows of input 0 at input 1's positions divided by this (x[perm // k],
  // the tokens of sorted token-expert pairs); 0: at the positions themselves (w[perm]).
  int64_t row_divisor = 0;
  // kGatherRows: at the positions of input 1's inverse permutation (restores the order a
  // sort changed).
  bool inverse_permutation = false;
  bool upcast = false;  // kSoftmax: softmax(..., dtype=torch.float32)
  RopeParams rope;      // kRopeTables
  // kLinear: the weight is stored [in, out] and multiplied as addmm(b, x, W) (GPT-2's
  // transformers Conv1D), so its gradient is x^T @ dY, not (dY^T @ x)^T.
  bool weight_in_out = false;
  // kWindowMask: the mask keeps packed samples apart (from position_ids); a window of 0 is
  // then the causal mask.
  bool packed_samples = false;
  // kChunkedNll: the vocabulary width of a tile (TRL's chunk_size) and Gemma's
  // final_logit_softcapping (0: none).
  int64_t vocab_tile = 0;
  double logit_softcap = 0.0;
  // kTraced: the recorded op, shared by the layers expanded from one template.
  std::shared_ptr<const TracedOp> traced;
};

// The op's compute class: the table's for its kind, a traced op's own.
inline OpClass ClassOfOp(const OpNode& op) {
  return op.kind == OpKind::kTraced && op.traced ? op.traced->op_class : OpClassOf(op.kind);
}

// The module of an imported op's name, "<module>/<aten op>" (docs/graph-file.md): the part
// before the last slash, or the whole name without one.
inline std::string_view ModuleOfTracedName(std::string_view name) {
  return name.substr(0, name.rfind('/'));
}

// A transformer block: the checkpointable segment [first_op, last_op] whose only
// input from outside is `input` and whose result is `output`.
struct BlockSegment {
  OpId first_op;
  OpId last_op;
  TensorId input;
  TensorId output;
  // Tensors the block writes into a Python object among its arguments (Gemma 4's
  // attention stores its K/V in shared_kv_states). torch.utils.checkpoint keeps a
  // checkpointed block's arguments for its recomputation: these outlive the block, and
  // what the recomputation writes there keeps its autograd graph (step_simulator.cc).
  std::vector<TensorId> kept_by_arguments;
};

// A rolled loop's repetitions held once (models/graph_expand.cc): ops [first_op,
// first_op + ops) are one repetition of the loop's middle iteration standing for `times`
// of them in a row, and the `ops` ops after them one more, the loop's last but one. The
// simulator replays the first with what `times - 1` more leave live beside it
// (planner/simulate/internal/repetition_replay.h); the time model counts it `times` times.
struct RepeatedOps {
  OpId first_op;
  int ops = 0;
  int64_t times = 1;
};

class OpGraph {
 public:
  // Room for this many ops and tensors: a graph expanded from a file knows its size, and
  // growing the op list would copy every op (Boost 1.74's stored vertices do not move).
  void Reserve(int ops, int tensors);
  TensorId AddTensor(TensorInfo info);
  TensorId AddInput(std::string name, SymShape shape, DType dtype);
  TensorId AddBuffer(std::string name, SymShape shape, DType dtype);
  // A floating-point buffer `model.to(dtype)` casts with the weights: stored in the frozen
  // weights' dtype of the plan's precision (TensorStates).
  TensorId AddWeightDtypeBuffer(std::string name, SymShape shape);
  TensorId AddParameter(std::string name, SymShape shape, ParamOptions options);
  // Adds an op and its output tensors (their producer and block are set here); returns
  // the output ids. Inputs must already exist: ops are added in execution order.
  std::vector<TensorId> AddOp(OpNode op, std::vector<TensorInfo> outputs);

  void BeginBlock(TensorId input);  // ops added from now on belong to the next block
  void EndBlock(TensorId output);
  // The last block's BlockSegment::kept_by_arguments, tensors it made.
  void KeepByArguments(std::vector<TensorId> tensors);
  void SetLoss(TensorId loss) { loss_ = loss; }
  // The tensor stays alive until the forward pass returns (a KV cache the model output holds).
  void HoldUntilForwardEnd(TensorId t) { held_until_forward_end_.push_back(t); }
  const std::vector<TensorId>& held_until_forward_end() const { return held_until_forward_end_; }
  // An input the training loop passes in its batch (input_ids, pixel_values, a separate
  // labels tensor), as opposed to one the model makes itself: a Python loop holds it until
  // the micro-batch's backward returns (`loss = model(**batch).loss; loss.backward()`).
  void MarkBatchInput(TensorId t) { batch_inputs_.push_back(t); }
  const std::vector<TensorId>& batch_inputs() const { return batch_inputs_; }
  // Python holds the tensor (a caller's loop variable, a function's local) until `op`
  // has run in the forward, after autograd and its other consumers let go of it.
  void HoldUntilOpRan(TensorId t, OpId op) { held_until_op_.push_back({t, op}); }
  const std::vector<std::pair<TensorId, OpId>>& held_until_op() const { return held_until_op_; }
  // What the graph takes the model's code to run where a user's install may run other
  // kernels (an imported graph's reference paths), one line each for the reports.
  void AddAssumption(std::string line) { assumptions_.push_back(std::move(line)); }
  const std::vector<std::string>& assumptions() const { return assumptions_; }
  // Ops [first_op, first_op + ops) stand for `times` repetitions (RepeatedOps); the next
  // `ops` ops, added already, are the same iteration once more.
  void MarkRepeated(OpId first_op, int ops, int64_t times);
  const std::vector<RepeatedOps>& repeated() const { return repeated_; }
  // Per op: how many times the step runs it (1 but in a repetition held once).
  std::vector<int64_t> ExecutionsPerOp() const;
  // The output of the model's input embedding (what transformers' get_input_embeddings()
  // returns): enable_input_require_grads() hooks it.
  void MarkInputEmbeddings(TensorId t) { input_embeddings_ = t; }
  TensorId input_embeddings() const { return input_embeddings_; }
  // The table input_embeddings() was looked up in (through Gemma's scale), or an invalid
  // id when no parameter made it.
  TensorId InputEmbeddingTable() const;

  const TensorInfo& tensor(TensorId id) const { return tensors_.at(id.value); }
  const OpNode& op(OpId id) const { return (*graph_)[id.value]; }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  int num_ops() const { return static_cast<int>(boost::num_vertices(*graph_)); }
  const std::vector<BlockSegment>& blocks() const { return blocks_; }
  TensorId loss() const { return loss_; }

  std::vector<TensorId> Parameters() const;
  // What block `block` reads from outside itself, parameters excluded: what its
  // checkpoint function saves and hands back when it recomputes.
  struct BlockReads {
    std::vector<TensorId> distinct;  // the block's input first, then the tables it reads
    std::vector<TensorId> all;       // one entry per op input, for use counts
  };
  BlockReads ExternalReads(int block) const;
  // How many ops of `block` up to `last_op` read `t`: its uses in a recomputation.
  int UsesWithinBlock(TensorId t, int block, OpId last_op) const;
  // Ops that read tensor `id` (directly; views are separate tensors), in execution order.
  const std::vector<OpId>& Consumers(TensorId id) const { return consumers_.at(id.value); }
  // The tensor whose storage `id` uses (itself unless it is a view).
  TensorId StorageOf(TensorId id) const;
  // Throws std::logic_error unless the ops, in insertion order, are a topological order
  // of the dependency DAG and every tensor is produced before it is read.
  void CheckWellFormed() const;

  int64_t ParameterCount() const;
  int64_t TrainableParameterCount() const;

 private:
  struct EdgeInfo {
    TensorId tensor;
  };
  // Edges are only ever added: they are kept in a vector, not one list node each (the
  // default), which an imported graph's thousands of edges allocate and free one by one.
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, OpNode,
                                      EdgeInfo, boost::no_property, boost::vecS>;

  // boost::adjacency_list (Boost 1.74) declares its copy operations and no move ones, so
  // an OpGraph moved out of a function (into a Result) would copy every op: an imported
  // graph unrolled over a long sequence holds hundreds of thousands. The graph lives
  // behind a pointer that moves; copying an OpGraph copies it.
  class MovableGraph {
   public:
    MovableGraph() : graph_(std::make_unique<Graph>()) {}
    MovableGraph(const MovableGraph& other) : graph_(std::make_unique<Graph>(*other.graph_)) {}
    MovableGraph(MovableGraph&& other) noexcept
        : graph_(std::exchange(other.graph_, std::make_unique<Graph>())) {}
    MovableGraph& operator=(const MovableGraph& other) {
      if (this != &other) graph_ = std::make_unique<Graph>(*other.graph_);
      return *this;
    }
    MovableGraph& operator=(MovableGraph&& other) noexcept {
      if (this != &other) graph_ = std::exchange(other.graph_, std::make_unique<Graph>());
      return *this;
    }
    Graph& operator*() { return *graph_; }
    const Graph& operator*() const { return *graph_; }

   private:
    std::unique_ptr<Graph> graph_;
  };

  MovableGraph graph_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::vector<OpId>> consumers_;  // per tensor
  std::vector<BlockSegment> blocks_;
  int current_block_ = -1;
  TensorId loss_;
  std::vector<TensorId> held_until_forward_end_;
  std::vector<TensorId> batch_inputs_;
  std::vector<std::pair<TensorId, OpId>> held_until_op_;
  std::vector<std::string> assumptions_;
  std::vector<RepeatedOps> repeated_;
  TensorId input_embeddings_;
};

}  // namespace headroom
