#include "planner/simulate/step_simulator.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

#include "planner/simulate/internal/buffer_ledger.h"
#include "planner/simulate/internal/engine_replays.h"
#include "planner/simulate/internal/hold_lists.h"
#include "planner/simulate/internal/kept_by_arguments.h"
#include "planner/simulate/internal/kept_replay.h"
#include "planner/simulate/internal/optimizer_replay.h"
#include "planner/simulate/internal/repetition_replay.h"
#include "planner/simulate/internal/simulation_tables_impl.h"

namespace headroom {
namespace {

constexpr int64_t kNoBuffer = -1;
// A parameter's .grad that is a view into DDP's bucket (gradient_as_bucket_view).
constexpr int64_t kBucketView = -2;
constexpr int64_t kNotCast = SimulationTables::Impl::kNotCast;

class StepSimulator {
 public:
  StepSimulator(const SimulationTables::Impl& tables, const TrainingConfig& config,
                const std::vector<bool>& checkpointed, const SimulationOptions& options)
      : tables_(tables),
        graph_(tables.graph),
        config_(config),
        batch_scale_(config.micro_batch),
        checkpointed_(checkpointed.begin(), checkpointed.end()),
        kept_(tables.graph, checkpointed_, tables.states.target().reentrant_checkpoint),
        options_(options),
        block_of_op_(tables.block_of_op),
        bytes_(tables.bytes),
        per_sample_(tables.per_sample),
        forward_uses_(tables.forward_uses),
        external_inputs_(tables.external_inputs),
        forward_costs_(tables.forward_costs),
        backward_costs_(tables.backward_costs) {
    if (static_cast<int>(checkpointed.size()) != static_cast<int>(graph_.blocks().size())) {
      throw std::logic_error("SimulateSteps: checkpoint flags do not match the number of blocks");
    }
  }

  Timeline Run() {
    // About a dozen events per op and pass (forward, backward, recompute), two passes per
    // replayed micro-batch: reserve rather than regrow.
    const size_t passes =
        static_cast<size_t>(options_.steps) * (config_.grad_accum_steps > 1 ? 2 : 1);
    timeline_.events.reserve(passes * static_cast<size_t>(graph_.num_ops()) * 12);
    timeline_.phases.reserve(passes * static_cast<size_t>(graph_.num_ops()) * 3);
    ledger_.Reserve(passes * static_cast<size_t>(graph_.num_ops()) * 6);
    Setup();
    for (int step = 1; step <= options_.steps; ++step) {
      // The middle micro-batches repeat the second one's memory: replay the first and
      // the last unless asked for all (the loop stays O(1) for any accumulation).
      const int64_t last = config_.grad_accum_steps;
      for (int64_t mb = 1; mb <= last;
           mb = options_.replay_every_micro_batch || mb == last ? mb + 1 : last) {
        Forward(step, mb);
        Backward(step, mb);
      }
      OptimizerStep(step);
      ZeroGrad(step);
      ledger_.CheckOnlyPersistentLive(step);
    }
    ledger_.FinishInsertions();
    return std::move(timeline_);
  }

 private:
  void SetPhase(Phase::Kind kind, int step, int64_t mb, OpId op = {}) {
    timeline_.phases.push_back({kind, step, mb, op, op.valid() ? block_of_op_[op.value] : -1});
    ledger_.SetPhase(static_cast<int32_t>(timeline_.phases.size() - 1));
  }

  // The index the next SetPhase gives its phase.
  int32_t NextPhase() const { return static_cast<int32_t>(timeline_.phases.size()); }
  bool IsParam(TensorId t) const { return tables_.is_param[t.value]; }
  // The input's bytes (at micro-batch 1) in the dtype the op uses, or kNotCast.
  int64_t CastBytes(OpId op, size_t i) const {
    return tables_.cast_bytes[tables_.first_input[op.value] + i];
  }
  int64_t Bytes(TensorId t) const { return bytes_[t.value]; }
  bool PerSample(TensorId t) const { return per_sample_[t.value]; }

  // ---- tensor handles: uses left per tensor, each live tensor holds one buffer ref ---
  void Bind(TensorId t, int64_t buffer, int uses) {
    buffer_of_[t.value] = buffer;
    uses_left_[t.value] = uses;
    if (uses == 0) ledger_.Release(buffer);
  }
  void UseDone(TensorId t) {
    if (--uses_left_[t.value] == 0) ledger_.Release(buffer_of_[t.value]);
    if (uses_left_[t.value] < 0)
      throw std::logic_error("simulator: tensor used more often than counted");
  }

  // ---- setup ---------------------------------------------------------------------
  void Setup() {
    SetPhase(Phase::Kind::kSetup, 0, 0);
    buffer_of_.assign(graph_.num_tensors(), kNoBuffer);
    uses_left_.assign(graph_.num_tensors(), 0);
    grad_of_.assign(graph_.num_tensors(), kNoBuffer);
    param_grad_.assign(graph_.num_tensors(), kNoBuffer);
    pending_grad_.assign(graph_.num_tensors(), kNoBuffer);
    pending_owned_.assign(graph_.num_tensors(), 0);
    grad_arrivals_.assign(graph_.num_tensors(), 0);
    op_holds_.Reset(graph_.num_ops());
    block_holds_.Reset(graph_.blocks().size());
    const ShardLayout& shards = tables_.shards;
    for (size_t i = 0; i < tables_.parameters.size(); ++i) {
      const TensorId p = tables_.parameters[i];
      // FSDP2 stores its shard (in CPU RAM when offloaded: nothing on the device);
      // ZeRO-3 its partition.
      const int64_t stored = config_.parallel.sharding == Sharding::kZero3
                                 ? shards.zero3.partition_numel[i] * shards.zero3.element_bytes[i]
                             : !config_.parallel.fsdp() ? Bytes(p)
                             : OptimizerOffloaded()     ? 0
                                                        : shards.local_param_bytes[i];
      buffer_of_[p.value] = ledger_.AcquirePersistent(stored, Category::kWeights);
      if (const int64_t master = tables_.master_bytes[i]; master > 0 && !OptimizerOffloaded())
        ledger_.AcquirePersistent(master, Category::kOptimizer);
    }
    for (TensorId b : tables_.model_buffers)
      buffer_of_[b.value] = ledger_.AcquirePersistent(Bytes(b), Category::kWeights);
    for (int64_t bucket : shards.ddp_bucket_bytes)
      ledger_.AcquirePersistent(bucket, Category::kGradients);
    if (shards.mesh_bytes > 0) ledger_.AcquirePersistent(shards.mesh_bytes, Category::kWeights);
    StartEngineReplays();
    if (options_.cublas_workspace_bytes > 0)
      ledger_.AcquirePersistent(options_.cublas_workspace_bytes, Category::kTemporaries);
  }

  // The engines' own buffers: FSDP2's gathers and reductions, DeepSpeed's buckets,
  // partitions and gathers, replayed through this simulator's accounting.
  void StartEngineReplays() {
    const ReplayMemory memory{
        .acquire = [this](int64_t bytes, Category c) { return ledger_.Acquire(bytes, c); },
        .release = [this](int64_t buffer) { ledger_.Release(buffer); },
        .acquire_persistent = [this](int64_t bytes,
                                     Category c) { return ledger_.AcquirePersistent(bytes, c); },
        .release_persistent = [this](int64_t buffer) { ledger_.ReleasePersistent(buffer); },
        .drop_grad =
            [this](size_t i) {
              int64_t& grad = param_grad_[tables_.parameters[i].value];
              if (grad >= 0) ledger_.Release(grad);
              grad = kNoBuffer;
            }};
    engines_.emplace(tables_, config_, OptimizerOffloaded(), memory);
  }

  // ---- forward -------------------------------------------------------------------
  void Forward(int step, int64_t mb) {
    step_ = step;
    mb_ = mb;
    SetPhase(Phase::Kind::kForward, step, mb);
    for (TensorId t : tables_.data_inputs) {
      Bind(t, ledger_.Acquire(Bytes(t), Category::kActivations, PerSample(t)),
           forward_uses_[t.value]);
    }
    engines_->StartForward();
    for (int o = 0; o < graph_.num_ops(); ++o) {
      const int block = block_of_op_[o];
      const bool ckpt = block >= 0 && checkpointed_[block];
      const BlockSegment* seg = block >= 0 ? &graph_.blocks()[block] : nullptr;
      engines_->BeforeOpForward(o);
      if (ckpt && seg->first_op.value == o) HoldBlockInputs(block);
      repetitions_.BeforeForward(o, NextPhase());
      RunOpForward(OpId{o}, /*grad_mode=*/!ckpt, /*recompute_block=*/-1);
      for (TensorId t : tables_.released_after_op[o]) UseDone(t);
      repetitions_.AfterForward(o);
      engines_->AfterOpForward(o);
    }
    for (TensorId t : graph_.held_until_forward_end()) UseDone(t);
    repetitions_.ReleaseCopies(-1);
    ExitAutocast(-1);
    engines_->EndForward();
  }

  // The checkpoint function saves the tensors its block reads from outside: the block
  // input and per-forward tables (rotary cos/sin, the causal mask). With activation
  // offload the block input, the one positional argument (transformers'
  // GradientCheckpointingLayer passes the rest bound in a partial), is packed to pinned host
  // memory instead: the checkpoint keeps no device reference to it.
  void HoldBlockInputs(int block) {
    for (TensorId t : external_inputs_[block]) {
      if (config_.activation_offload && t == graph_.blocks()[block].input) continue;
      ledger_.Retain(buffer_of_[t.value]);
      block_holds_.Add(block, buffer_of_[t.value]);
    }
    if (const int64_t rng = tables_.states.target().checkpoint_rng_state_bytes; rng > 0) {
      // torch.utils.checkpoint drops its stash with the block's saved tensors; LibTorch's
      // Function keeps saved_data until the graph is freed.
      const int64_t stash = ledger_.Acquire(rng, Category::kActivations);
      if (tables_.states.target().reentrant_checkpoint) {
        until_backward_end_.push_back(stash);
      } else {
        block_holds_.Add(block, stash);
      }
    }
  }

  bool IsInsideBlock(TensorId t, int block) const {
    return tables_.producer_block[t.value] == block;
  }

  // Autocast exit (end of forward, or end of a recomputed block's backward) drops the
  // weight-cast cache; copies that ops saved stay alive through those ops. In a
  // recomputation (`recompute_block` >= 0) the cache's own references are released
  // with the block's other holds.
  void ExitAutocast(int recompute_block) {
    for (auto& [param, buffer] : cast_cache_) {
      if (recompute_block >= 0) {
        block_holds_.Add(recompute_block, buffer);
      } else {
        ledger_.Release(buffer);
      }
    }
    cast_cache_.clear();
  }

  int UsesOf(TensorId t, int recompute_block) const {
    // In a full forward every consumer counts (and the loss stays until backward starts);
    // in a recomputation only the block's own consumers run again.
    if (recompute_block < 0) return forward_uses_[t.value];
    return graph_.UsesWithinBlock(t, recompute_block, OpId{RecomputeEnd(recompute_block)});
  }

  int RecomputeEnd(int block) const {
    return tables_.states.target().reentrant_checkpoint ? graph_.blocks()[block].last_op.value
                                                        : tables_.recompute_end[block];
  }

  void RunOpForward(OpId op_id, bool grad_mode, int recompute_block) {
    const OpNode& op = graph_.op(op_id);
    const bool recompute = recompute_block >= 0;
    SetPhase(recompute ? Phase::Kind::kRecompute : Phase::Kind::kForward, step_, mb_, op_id);
    const SimulationTables::Impl::OpForward& cost = forward_costs_[grad_mode][op_id.value];
    transients_.clear();
    for (int k = cost.internals_begin; k < cost.internals_end; ++k) {
      const InternalBuffer& internal = tables_.internals[k];
      HoldInternal(op_id, AcquireInternal(op, internal), internal.lifetime);
    }
    SaveInputs(op_id, op, cost);
    BindOutputs(op_id, op, cost, recompute_block);
    if (cost.workspace_bytes > 0)
      ledger_.Release(ledger_.Acquire(cost.workspace_bytes, Category::kTemporaries, true));
    if (cost.brgemm.valid())
      ledger_.Release(
          ledger_.Acquire(cost.brgemm.ScratchBytes(batch_scale_), Category::kTemporaries));
    if (cost.chunked_loss >= 0)
      ledger_.Release(ledger_.Acquire(
          tables_.chunked_losses[cost.chunked_loss].ForwardTransientBytes(batch_scale_),
          Category::kTemporaries));
    for (int64_t b : transients_) ledger_.Release(b);
    for (TensorId in : op.inputs) {
      if (IsParam(in)) continue;
      if (recompute && !IsInsideBlock(in, recompute_block))
        continue;  // consumed in the first forward
      UseDone(in);
    }
  }

  // An op's internal buffer: an autocast copy of an input (cached for trainable
  // weights until autocast exits), or its own scratch or saved state.
  int64_t AcquireInternal(const OpNode& op, const InternalBuffer& internal) {
    using Lifetime = InternalBuffer::Lifetime;
    if (internal.cast_of_input < 0) {
      const Category category = internal.weight_copy                    ? Category::kWeightCasts
                                : internal.lifetime == Lifetime::kSaved ? Category::kActivations
                                                                        : Category::kTemporaries;
      return ledger_.Acquire(internal.bytes, category, internal.per_sample);
    }
    const TensorId src = op.inputs[internal.cast_of_input];
    if (!tables_.trainable[src.value]) {
      return ledger_.Acquire(internal.bytes,
                             IsParam(src) ? Category::kWeightCasts : Category::kActivations,
                             internal.per_sample);
    }
    // Autocast caches casts of leaf fp32 weights that require grad.
    auto it = cast_cache_.find(src.value);
    if (it == cast_cache_.end())
      it = cast_cache_
               .emplace(src.value, ledger_.Acquire(internal.bytes, Category::kWeightCasts, false))
               .first;
    ledger_.Retain(it->second);
    return it->second;
  }

  void HoldInternal(OpId op_id, int64_t buffer, InternalBuffer::Lifetime lifetime) {
    switch (lifetime) {
      case InternalBuffer::Lifetime::kEphemeral:
        ledger_.Release(buffer);
        break;
      case InternalBuffer::Lifetime::kTransient:
        transients_.push_back(buffer);
        break;
      case InternalBuffer::Lifetime::kSaved:
        op_holds_.Add(op_id.value, buffer);
        break;
    }
  }

  // Autograd holds the inputs the op saves (an autocast copy is saved instead, above).
  void SaveInputs(OpId op_id, const OpNode& op, const SimulationTables::Impl::OpForward& cost) {
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const TensorId in = op.inputs[i];
      if (!tables_.saves_input[cost.saves_begin + i] || CastBytes(op_id, i) != kNotCast ||
          IsParam(in))
        continue;
      ledger_.Retain(buffer_of_[in.value]);
      op_holds_.Add(op_id.value, buffer_of_[in.value]);
    }
  }

  void BindOutputs(OpId op_id, const OpNode& op, const SimulationTables::Impl::OpForward& cost,
                   int recompute_block) {
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      const TensorId out = op.outputs[o];
      int64_t buffer;
      if (cost.output_aliases_input) {
        buffer = buffer_of_[op.inputs[0].value];
        ledger_.Retain(buffer);
      } else {
        buffer = ledger_.Acquire(Bytes(out), Category::kActivations, PerSample(out));
      }
      int uses = UsesOf(out, recompute_block);
      if (recompute_block >= 0 && tables_.states.target().reentrant_checkpoint &&
          out == graph_.blocks()[recompute_block].output)
        ++uses;  // held by the checkpoint backward
      if (cost.saved_outputs & (1u << o)) {
        ledger_.Retain(buffer);
        op_holds_.Add(op_id.value, buffer);
      }
      if (kept_.any())
        kept_replay_.OutputMade(op_id.value, block_of_op_[op_id.value], out, buffer,
                                recompute_block >= 0);
      Bind(out, buffer, uses);
    }
  }

  // ---- backward ------------------------------------------------------------------
  void Backward(int step, int64_t mb) {
    SetPhase(Phase::Kind::kBackward, step, mb, graph_.tensor(graph_.loss()).producer);
    const TensorId loss = graph_.loss();
    engines_->StartBackward();
    // loss.backward() (torch/autograd/__init__.py backward): _make_grads' ones_like seed
    // stays in grad_tensors_ until the engine returns, and the caller holds the loss
    // itself (`loss.backward()`, then `del loss`): both live through the whole backward.
    const int64_t seed = ledger_.Acquire(StorageBytes(DType::kF32, 1), Category::kTemporaries);
    grad_of_[loss.value] = seed;
    ledger_.Retain(seed);
    for (int o = graph_.num_ops() - 1; o >= 0; --o) {
      const int block = block_of_op_[o];
      const bool ckpt = block >= 0 && checkpointed_[block];
      const bool reentrant = tables_.states.target().reentrant_checkpoint;
      engines_->BeforeOpBackward(o);
      if (ckpt && reentrant && graph_.blocks()[block].last_op.value == o) {
        // The checkpoint's backward is handed its output's gradient and holds it until
        // the block's whole backward returns (as PyTorch's reentrant checkpoint does).
        const int64_t output_grad = grad_of_[graph_.blocks()[block].output.value];
        if (output_grad != kNoBuffer) {
          ledger_.Retain(output_grad);
          block_holds_.Add(block, output_grad);
        }
      }
      if (ckpt && RecomputeEnd(block) == o) Recompute(block);
      RunOpBackward(OpId{o});
      if (ckpt && graph_.blocks()[block].first_op.value == o) {
        block_holds_.ReleaseAll(block, [this](int64_t b) { ledger_.Release(b); });
        if (reentrant) UseDone(graph_.blocks()[block].output);
        if (kept_.any() && block == kept_.ArgumentsFreedAfter()) kept_replay_.ReleaseAll();
      }
      repetitions_.AfterBackward(o);
      engines_->AfterOpBackward(o);
    }
    engines_->EndBackward();
    for (int64_t b : until_backward_end_) ledger_.Release(b);
    until_backward_end_.clear();
    for (TensorId t : tables_.held_batch) UseDone(t);
    ledger_.Release(seed);
    UseDone(loss);
    if (tables_.grad_leaf.valid()) {
      // The graph is freed: the hooked embedding output and its .grad go with it.
      if (leaf_grad_ != kNoBuffer) ledger_.Release(leaf_grad_);
      leaf_grad_ = kNoBuffer;
      UseDone(tables_.grad_leaf);
    }
    repetitions_.ReleaseCopies(-1);
    for (int i = 0; i < graph_.num_tensors(); ++i) {
      if (grad_of_[i] != kNoBuffer) {
        throw std::logic_error("simulator: gradient of " + graph_.tensor(TensorId{i}).name +
                               " never consumed");
      }
    }
  }

  void Recompute(int block) {
    const BlockSegment& seg = graph_.blocks()[block];
    // Offloaded: unpacking copies the block input back to the device (save_on_cpu's
    // unpack_from_cpu, tensor.to(device)) and the recomputation reads the copy, keeping what
    // it saves of it. The first forward's buffer may still be live elsewhere (the
    // embedding's hooked output): the tensor's again afterwards.
    const int64_t original = buffer_of_[seg.input.value];
    if (config_.activation_offload)
      buffer_of_[seg.input.value] =
          ledger_.Acquire(Bytes(seg.input), Category::kActivations, PerSample(seg.input));
    const int64_t rng_bytes = tables_.states.target().checkpoint_rng_state_bytes;
    const int64_t forked_rng =
        rng_bytes > 0 ? ledger_.Acquire(rng_bytes, Category::kTemporaries) : kNoBuffer;
    for (int o = seg.first_op.value; o <= RecomputeEnd(block); ++o) {
      engines_->BeforeRecomputedOp(o);
      repetitions_.BeforeForward(o, NextPhase());
      RunOpForward(OpId{o}, /*grad_mode=*/true, block);
      repetitions_.AfterForward(o);
      // The recomputation writes the arguments' entries again: the first forward's go.
      if (kept_.any() && o == kept_.LastWriteOp(block)) kept_replay_.ReleaseOriginals(block);
      engines_->AfterRecomputedOp(o);
    }
    if (kept_.any()) kept_replay_.KeepRecomputedGraph(block, op_holds_);
    ExitAutocast(block);
    if (forked_rng != kNoBuffer) ledger_.Release(forked_rng);
    if (config_.activation_offload) {
      ledger_.Release(buffer_of_[seg.input.value]);  // the unpack hook's args
      buffer_of_[seg.input.value] = original;
    }
  }

  void RunOpBackward(OpId op_id) {
    const OpNode& op = graph_.op(op_id);
    bool has_grad = false;
    for (TensorId out : op.outputs) has_grad = has_grad || grad_of_[out.value] != kNoBuffer;
    if (has_grad) ReturnGradients(op_id, op);
    op_holds_.ReleaseAll(op_id.value, [this](int64_t b) { ledger_.Release(b); });
    for (TensorId out : op.outputs) {
      if (grad_of_[out.value] == kNoBuffer) continue;
      if (out == tables_.grad_leaf) {
        leaf_grad_ = grad_of_[out.value];  // AccumulateGrad keeps it as the leaf's .grad
      } else {
        ledger_.Release(grad_of_[out.value]);
      }
      grad_of_[out.value] = kNoBuffer;
    }
    // The engine frees the node's saved tensors and its inputs, then sums what it returned
    // into the next nodes' input buffers (engine.cpp, evaluate_function).
    for (const auto& [t, buffer] : returned_grads_) SumActivationGradient(t, buffer);
    returned_grads_.clear();
    // The nodes downstream of this one run after it has returned: autocast's
    // ToCopyBackward0 of a cast weight, then AccumulateGrad (and the engine's sum of a
    // tied weight's gradients in its input buffer).
    for (const ParamGradOut& out : param_grads_out_) {
      int64_t grad = out.buffer;
      if (out.cast) {
        grad = ledger_.Acquire(Bytes(out.param), Category::kGradients);
        ledger_.Release(out.buffer);
      }
      GradientArrives(out.param, grad, /*owned=*/out.cast || op.kind != OpKind::kLinear);
    }
    param_grads_out_.clear();
  }

  // The node's own backward: the gradients it returns, with its scratch and workspace.
  void ReturnGradients(OpId op_id, const OpNode& op) {
    SetPhase(Phase::Kind::kBackward, step_, mb_, op_id);
    const SimulationTables::Impl::OpBackward& cost = backward_costs_[op_id.value];
    const GradFlow* input_grads = &tables_.input_grads[cost.grads_begin];
    // An imported op's workspace is its recorded node's peak less the gradients it
    // returns (graph_lift.py): it lives beside them, and the engine sums them into the
    // input buffers after the node (RunOpBackward). The built ops' workspaces come after
    // their gradients, each summed as it is made.
    const bool recorded = op.kind == OpKind::kTraced;
    const Workspace recorded_workspace = recorded ? AcquireWorkspace(cost) : Workspace{};
    // Activations' gradients first, then the parameters' (the order of autograd's
    // formulas for the matrix products, the only ops whose order shows).
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (input_grads[i] == GradFlow::kNone || IsParam(op.inputs[i])) continue;
      const int64_t grad = NewActivationGradient(op_id, op, i, input_grads[i]);
      if (recorded) {
        returned_grads_.emplace_back(op.inputs[i], grad);
      } else {
        SumActivationGradient(op.inputs[i], grad);
      }
    }
    if (cost.input_grad_scratch_bytes > 0)
      ledger_.Release(ledger_.Acquire(cost.input_grad_scratch_bytes, Category::kTemporaries, true));
    if (const int64_t s = cost.input_grad_brgemm.ScratchBytes(batch_scale_); s > 0)
      ledger_.Release(ledger_.Acquire(s, Category::kTemporaries));
    const int64_t weight_scratch =
        cost.weight_grad_scratch_bytes + cost.weight_grad_brgemm.ScratchBytes(batch_scale_);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (input_grads[i] != GradFlow::kNone && IsParam(op.inputs[i]))
        ParamGradient(op_id, op, i, i == 1 ? weight_scratch : 0);
    }
    ReleaseWorkspace(recorded ? recorded_workspace : AcquireWorkspace(cost));
  }

  // The workspace at the backward's height: both parts live at once.
  struct Workspace {
    int64_t scaled = kNoBuffer;
    int64_t fixed = kNoBuffer;
    int64_t tiles = kNoBuffer;  // TRL's fused LM head, at the micro-batch
  };
  Workspace AcquireWorkspace(const SimulationTables::Impl::OpBackward& cost) {
    Workspace w;
    if (cost.workspace_bytes > 0)
      w.scaled =
          ledger_.Acquire(cost.workspace_bytes, Category::kTemporaries, cost.workspace_per_sample);
    if (cost.workspace_fixed_bytes > 0)
      w.fixed = ledger_.Acquire(cost.workspace_fixed_bytes, Category::kTemporaries);
    if (cost.chunked_loss >= 0)
      w.tiles = ledger_.Acquire(
          tables_.chunked_losses[cost.chunked_loss].BackwardWorkspaceBytes(batch_scale_),
          Category::kTemporaries);
    return w;
  }
  void ReleaseWorkspace(const Workspace& w) {
    for (int64_t b : {w.scaled, w.fixed, w.tiles})
      if (b != kNoBuffer) ledger_.Release(b);
  }

  // The gradient an op's backward returns for input i (before the engine sums it).
  int64_t NewActivationGradient(OpId op_id, const OpNode& op, size_t i, GradFlow flow) {
    const TensorId t = op.inputs[i];
    int64_t buffer;
    if (flow == GradFlow::kPassThrough) {
      buffer = grad_of_[op.outputs[0].value];
      ledger_.Retain(buffer);
    } else if (const int64_t cast = CastBytes(op_id, i); cast != kNotCast) {
      // Gradient in the dtype the op used, then autocast's cast backward converts it.
      const int64_t used = ledger_.Acquire(cast, Category::kTemporaries, PerSample(t));
      buffer = ledger_.Acquire(Bytes(t), Category::kTemporaries, PerSample(t));
      ledger_.Release(used);
    } else {
      buffer = ledger_.Acquire(Bytes(t), Category::kTemporaries, PerSample(t));
    }
    return buffer;
  }

  // The engine's input buffer for t: the first gradient kept, a later one added in place
  // when the first is held by nothing else, else summed into a new tensor.
  void SumActivationGradient(TensorId t, int64_t buffer) {
    int64_t& slot = grad_of_[t.value];
    if (slot == kNoBuffer) {
      slot = buffer;
    } else if (ledger_.refs(slot) == 1) {
      ledger_.Release(buffer);  // accumulated in place
    } else {
      const int64_t sum = ledger_.Acquire(Bytes(t), Category::kTemporaries, PerSample(t));
      ledger_.Release(slot);
      ledger_.Release(buffer);
      slot = sum;
    }
  }

  // `scratch_bytes`: the product's transient scratch, beside the fresh gradient.
  void ParamGradient(OpId op_id, const OpNode& op, size_t i, int64_t scratch_bytes) {
    const TensorId p = op.inputs[i];
    if (const int64_t cast = CastBytes(op_id, i); cast != kNotCast) {
      // The product runs in the dtype the op used, with its scratch beside it. Autocast's
      // cast of the weight is its own autograd node (ToCopyBackward0): it converts the
      // gradient after this node returned, when the engine has freed this node's saved
      // tensors and output gradient (RunOpBackward).
      const int64_t used = ledger_.Acquire(cast, Category::kTemporaries);
      if (scratch_bytes > 0)
        ledger_.Release(ledger_.Acquire(scratch_bytes, Category::kTemporaries));
      param_grads_out_.push_back({p, used, /*cast=*/true});
      return;
    }
    const int64_t grad = ledger_.Acquire(Bytes(p), Category::kGradients);
    if (scratch_bytes > 0) ledger_.Release(ledger_.Acquire(scratch_bytes, Category::kTemporaries));
    param_grads_out_.push_back({p, grad, /*cast=*/false});
  }

  // The engine sums a parameter's gradients within one backward in its input buffer
  // (torch/csrc/autograd/input_buffer.cpp, accumulate): in place into the first one when
  // it holds that tensor's only reference and storage (can_accumulate_inplace), as for
  // the fresh fp32 copy of autocast's ToCopyBackward0; out of place otherwise (both
  // operands and the sum live at once), as for a linear's weight gradient, TBackward0's
  // view whose base shares its storage. AccumulateGrad then takes the sum when all
  // have arrived.
  void GradientArrives(TensorId p, int64_t grad, bool owned) {
    if (const int64_t pending = pending_grad_[p.value]; pending != kNoBuffer) {
      if (pending_owned_[p.value]) {
        ledger_.Release(grad);  // added in place into the pending gradient
        grad = pending;
      } else {
        const int64_t sum = ledger_.Acquire(Bytes(p), Category::kGradients);
        ledger_.Release(pending);
        ledger_.Release(grad);
        grad = sum;
      }
      owned = true;
    }
    if (++grad_arrivals_[p.value] < tables_.param_grad_arrivals[p.value]) {
      pending_grad_[p.value] = grad;
      pending_owned_[p.value] = owned;
      return;
    }
    pending_grad_[p.value] = kNoBuffer;
    grad_arrivals_[p.value] = 0;
    if (engines_->TakeGradient(tables_.param_index[p.value], grad)) {
      // DeepSpeed's gradient hook (reduce_independent_p_g_buckets_and_remove_grads).
      param_grad_[p.value] = kBucketView;
    } else if (param_grad_[p.value] == kNoBuffer && config_.parallel.ddp_bucket_view) {
      // DDP's hook copies the fresh .grad into its bucket and makes .grad a view of it
      // (reducer.cpp mark_variable_ready_dense): the fresh tensor is freed.
      ledger_.Release(grad);
      param_grad_[p.value] = kBucketView;
    } else if (param_grad_[p.value] == kNoBuffer) {
      param_grad_[p.value] = grad;  // AccumulateGrad steals it as .grad
    } else {
      ledger_.Release(grad);  // added in place into .grad
    }
  }

  // ---- optimizer -----------------------------------------------------------------
  void OptimizerStep(int step) {
    SetPhase(Phase::Kind::kOptimizerStep, step, 0);
    engines_->OptimizerStep(step);
    optimizer_.Step(step);
  }

  bool OptimizerOffloaded() const { return config_.parallel.offload != Offload::kNone; }

  void ZeroGrad(int step) {
    SetPhase(Phase::Kind::kZeroGrad, step, 0);
    for (int64_t& g : param_grad_) {
      if (g >= 0) ledger_.Release(g);  // a bucket view stays in its bucket
      g = kNoBuffer;
    }
    engines_->ZeroGrad();
  }

  const SimulationTables::Impl& tables_;
  const OpGraph& graph_;
  const TrainingConfig& config_;
  const int64_t batch_scale_;                // the micro-batch
  const std::vector<uint8_t> checkpointed_;  // per block
  const KeptByArguments kept_;               // what the checkpointed arguments keep
  SimulationOptions options_;
  const std::vector<int>& block_of_op_;
  // Per-op scratch of RunOpBackward: the parameter gradients a node produced, handed on
  // once it has returned (in the dtype the op used when autocast cast the weight).
  struct ParamGradOut {
    TensorId param;
    int64_t buffer;
    bool cast;
  };
  std::vector<ParamGradOut> param_grads_out_;
  // Per-op scratch of RunOpBackward: an imported op's activation gradients, summed into
  // the engine's input buffers once the node has returned.
  std::vector<std::pair<TensorId, int64_t>> returned_grads_;
  const std::vector<int64_t>& bytes_;
  const std::vector<uint8_t>& per_sample_;
  const std::vector<int>& forward_uses_;
  const std::vector<std::vector<TensorId>>& external_inputs_;
  const std::vector<SimulationTables::Impl::OpForward> (&forward_costs_)[2];  // [grad_mode]
  const std::vector<SimulationTables::Impl::OpBackward>& backward_costs_;
  std::vector<int64_t> transients_;  // scratch for RunOpForward

  Timeline timeline_;
  int step_ = 0;
  int64_t mb_ = 0;
  BufferLedger ledger_{timeline_, batch_scale_};
  RepetitionReplay repetitions_{graph_, ledger_};  // a rolled loop's repetitions held once
  OptimizerReplay optimizer_{tables_, OptimizerOffloaded(), ledger_};
  KeptReplay kept_replay_{kept_, graph_.blocks().size(), ledger_};  // what the arguments keep
  std::vector<int64_t> buffer_of_;
  std::vector<int> uses_left_;
  std::vector<int64_t> grad_of_;
  std::vector<int64_t> param_grad_;
  std::vector<int64_t> pending_grad_;        // a gradient waiting for the parameter's others
  std::vector<uint8_t> pending_owned_;       // ... and the engine may add into it in place
  int64_t leaf_grad_ = kNoBuffer;            // the hooked embedding output's .grad
  std::vector<int64_t> until_backward_end_;  // buffers the autograd graph holds to its end
  std::vector<int> grad_arrivals_;
  HoldLists op_holds_;                     // per op: what its forward saved for its backward
  HoldLists block_holds_;                  // per checkpointed block: what its checkpoint holds
  std::map<int32_t, int64_t> cast_cache_;  // parameter -> its autocast copy
  std::optional<EngineReplays> engines_;   // FSDP2's or DeepSpeed's buffers (set in Setup)
};

}  // namespace

Timeline SimulateSteps(const OpGraph& graph, const TrainingConfig& config,
                       const std::vector<bool>& checkpointed, const SimulationOptions& options) {
  return SimulateSteps(SimulationTables(graph, config), checkpointed, options);
}

Timeline SimulateSteps(const SimulationTables& tables, const std::vector<bool>& checkpointed,
                       const SimulationOptions& options) {
  return StepSimulator(tables.impl(), tables.config(), checkpointed, options).Run();
}

}  // namespace headroom
