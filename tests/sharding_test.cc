// Data parallelism: the layouts each scheme replays (ZeRO-1's partition, DDP's buckets,
// FSDP2's padded shards), the communication model, and the CLI's many-GPU outputs.
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "models/build_graph.h"
#include "models/catalog.h"
#include "planner/plan/plan_file.h"
#include "planner/simulate/shard_layout.h"
#include "planner/simulate/step_prediction.h"
#include "planner/solve/comm_time_model.h"
#include "planner/solve/gpu_count_search.h"
#include "tests/cli_runner.h"

namespace headroom {
namespace {

TEST(ShardLayout, ZeroRedundancyPartitionIsGreedyLargestFirst) {
  // Sorted: 10 (rank 0), 8 (rank 1), 5 (rank 1: 8 < 10), 3 (rank 0: 10 < 13), 3 (rank 0:
  // 13 = 13, the lowest rank on a tie).
  const std::vector<int64_t> rank_of = PartitionLikeZeroRedundancy({3, 10, 5, 8, 3}, 2);
  EXPECT_EQ(rank_of, (std::vector<int64_t>{0, 0, 1, 1, 0}));
}

TEST(ShardLayout, DdpBucketsCloseAtOneMibThenTwentyFive) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  // Reverse order: 600 KiB + 600 KiB closes the first bucket (>= 1 MiB); the rest, 30
  // MiB, closes the second at 25 MiB... in one piece, since a tensor is never split.
  const std::vector<int64_t> buckets = DdpBucketBytes({30 * kMiB, 600 * 1024, 600 * 1024});
  EXPECT_EQ(buckets, (std::vector<int64_t>{1200 * 1024, 30 * kMiB}));
  EXPECT_EQ(DdpBucketBytes({100, 200}), (std::vector<int64_t>{300}));
}

struct TinyRun {
  StepPrediction prediction;
  int64_t num_params = 0;    // parameter tensors
  int64_t buffer_bytes = 0;  // the model's buffers (the rotary module's inv_freq and clone)
};

TinyRun PredictTiny(const std::string& model, Parallelism parallel) {
  const ModelSpec spec = *ResolveModel(model);
  TrainingConfig c;
  c.precision = Precision::kFp32;
  c.seq_len = 64;
  c.kernels.cuda = false;
  c.parallel = parallel;
  const OpGraph graph = *BuildGraph(spec, GraphOptionsOf(c));
  int64_t buffer_bytes = 0;
  for (int t = 0; t < graph.num_tensors(); ++t) {
    const TensorInfo& info = graph.tensor(TensorId{t});
    if (info.role == TensorRole::kBuffer)
      buffer_bytes += StorageBytes(info.fixed_dtype.value_or(DType::kF32), info.shape.Numel({}));
  }
  return {PredictStep(graph, c, std::vector<bool>(graph.blocks().size(), false),
                      CpuDevice(int64_t{16} << 30)),
          static_cast<int64_t>(graph.Parameters().size()), buffer_bytes};
}

// Live bytes once two steps are over: the persistent state.
int64_t EndOfStep(const StepPrediction& p) {
  int64_t live = 0;
  for (const MemoryEvent& e : p.timeline.events)
    live += e.kind == MemoryEvent::Kind::kAlloc ? e.bytes : -e.bytes;
  return live;
}

TEST(ShardLayout, FsdpShardsWeightsAndStatesOverTheRanks) {
  const TinyRun one = PredictTiny("tiny-llama", {});
  const TinyRun four = PredictTiny("tiny-llama", {.gpus = 4, .sharding = Sharding::kFsdp});
  // Weights and the two Adam states a quarter each (every dim 0 of the tiny model
  // divides by 4); torch.optim's 4-byte step tensor per parameter whole; the buffers
  // whole (fully_shard shards parameters only); the device mesh's arange(4), 16 bytes.
  const int64_t steps = 4 * one.num_params;
  ASSERT_EQ(one.buffer_bytes, 2 * 8 * 4);  // two fp32 [head_dim / 2] tables
  EXPECT_EQ(EndOfStep(four.prediction), (EndOfStep(one.prediction) - steps - one.buffer_bytes) / 4 +
                                            steps + one.buffer_bytes + 16);
  EXPECT_LT(four.prediction.allocated_peak_bytes, one.prediction.allocated_peak_bytes);
}

TEST(ShardLayout, DdpAddsOneBucketCopyOfTheGradients) {
  const StepPrediction one = PredictTiny("tiny-gpt2", {}).prediction;
  const StepPrediction ddp =
      PredictTiny("tiny-gpt2", {.gpus = 2, .sharding = Sharding::kDdp}).prediction;
  EXPECT_EQ(ddp.allocated_peak_bytes - one.allocated_peak_bytes,
            4 * one.params_trainable);  // fp32 buckets as large as the gradients
}

TEST(ShardLayout, DeepSpeedPartitionAlignsToTwoWAndCountsWholeParameters) {
  // 22 elements padded to 24 (a multiple of 2W = 4): partitions [0, 12) and [12, 24).
  // Rank 0 holds parameters 0 (0-10) and 1 (10-17); rank 1 parameters 1 and 2 (17-22).
  const ZeroPartition r0 = PartitionLikeDeepSpeed({10, 7, 5}, 2, 0);
  const ZeroPartition r1 = PartitionLikeDeepSpeed({10, 7, 5}, 2, 1);
  EXPECT_EQ(r0.partition_numel, 12);
  EXPECT_EQ(r0.padding_numel, 2);
  EXPECT_EQ(r0.grads_in_partition_numel, 17);
  EXPECT_EQ(r1.grads_in_partition_numel, 12);
  EXPECT_EQ(r1.in_partition, (std::vector<uint8_t>{0, 1, 1}));
  // A frozen parameter (numel 0 in the group) is in nobody's partition.
  EXPECT_EQ(PartitionLikeDeepSpeed({8, 0}, 2, 0).in_partition, (std::vector<uint8_t>{1, 0}));
}

TEST(ShardLayout, ZeroTwoKeepsTheFlatWeightsAndAPartitionOfTheRest) {
  const TinyRun one = PredictTiny("tiny-llama", {});
  Parallelism zero2{.gpus = 4, .sharding = Sharding::kZero2};
  zero2.deepspeed.reduce_bucket_size = 1000;
  const TinyRun four = PredictTiny("tiny-llama", zero2);
  const int64_t p = one.prediction.params_trainable;
  const int64_t part = (p + 7) / 8 * 8 / 4;  // padded to 2W = 8, a quarter each
  // After the steps: every weight (plus the flat buffer's padding) and buffer, and the
  // fp32 master partition with AdamW's two states and its one step tensor, where one
  // rank holds two states and a step tensor per parameter.
  const int64_t padding = 4 * part - p;
  EXPECT_EQ(EndOfStep(four.prediction), EndOfStep(one.prediction) - 2 * 4 * p - 4 * one.num_params +
                                            4 * padding + 3 * 4 * part + 4);
  EXPECT_LT(four.prediction.allocated_peak_bytes, one.prediction.allocated_peak_bytes);
}

TEST(ShardLayout, OffloadMovesTheOptimizerToCpuRam) {
  Parallelism zero2{.gpus = 2, .sharding = Sharding::kZero2};
  zero2.deepspeed.reduce_bucket_size = 1000;
  const StepPrediction on_device = PredictTiny("tiny-llama", zero2).prediction;
  zero2.offload = Offload::kOptimizer;
  const StepPrediction offloaded = PredictTiny("tiny-llama", zero2).prediction;
  EXPECT_EQ(on_device.offload_cpu_bytes, 0);
  EXPECT_LT(offloaded.allocated_peak_bytes, on_device.allocated_peak_bytes);
  const int64_t part = (on_device.params_trainable + 3) / 4 * 4 / 2;
  // fp32 master, its gradient, the fp32 staging copy, AdamW's two states and its step,
  // and the largest parameter's CPU staging buffer (at least the 512 x 64 embedding).
  EXPECT_GE(offloaded.offload_cpu_bytes, 5 * 4 * part + 4 + 4 * 512 * 64);
  EXPECT_LT(offloaded.offload_cpu_bytes, 5 * 4 * part + 4 + 4 * 4 * part);
}

TEST(ShardLayout, FsdpOffloadLeavesNoShardOnTheDevice) {
  Parallelism fsdp{.gpus = 2, .sharding = Sharding::kFsdp};
  const TinyRun on_device = PredictTiny("tiny-llama", fsdp);
  fsdp.offload = Offload::kOptimizerAndParams;
  const TinyRun offloaded = PredictTiny("tiny-llama", fsdp);
  // Between steps the device keeps only the model's buffers and the mesh's arange(2):
  // shards, sharded gradients and states are in CPU RAM, and there as much as the
  // device held of them.
  const int64_t kept = EndOfStep(offloaded.prediction);
  EXPECT_LT(kept, 4096);
  EXPECT_EQ(offloaded.prediction.offload_cpu_bytes,
            EndOfStep(on_device.prediction) - kept +
                on_device.prediction.params_trainable * 4 / 2);  // + the sharded grads
  EXPECT_LT(offloaded.prediction.allocated_peak_bytes, on_device.prediction.allocated_peak_bytes);
}

TEST(ShardLayout, AccelerateWrapLetsTheEmbeddingGoAndKeepsTheHead) {
  const TinyRun blocks = PredictTiny("tiny-llama", {.gpus = 2, .sharding = Sharding::kFsdp});
  const TinyRun accelerate = PredictTiny(
      "tiny-llama", {.gpus = 2, .sharding = Sharding::kFsdp, .fsdp_wrap = FsdpWrap::kAccelerate});
  // The same shards between steps; at the peak (the loss's backward) one root unit holds
  // the embedding gathered and the last block prefetched, while accelerate's embedding
  // unit was resharded after the lookup and its tail prefetches only once the logits'
  // gradient arrives.
  EXPECT_EQ(EndOfStep(accelerate.prediction), EndOfStep(blocks.prediction));
  EXPECT_LT(accelerate.prediction.allocated_peak_bytes, blocks.prediction.allocated_peak_bytes);
}

// FSDP2's MixedPrecisionPolicy(param_dtype=bf16) over fp32 shards: what is stored (the
// shards, their gradients, the states) is the same as without a policy; what is gathered
// and computed with is bf16, so the peak falls. Measured on 2 gloo ranks to 0.00%
// (run_distributed_suite.py, "mp bf16/None").
TEST(ShardLayout, FsdpPolicyGathersInItsDtypeAndStoresAsBefore) {
  const Parallelism plain{.gpus = 2, .sharding = Sharding::kFsdp};
  Parallelism policy = plain;
  policy.fsdp_param_dtype = DType::kBF16;
  const TinyRun fp32 = PredictTiny("tiny-llama", plain);
  const TinyRun bf16 = PredictTiny("tiny-llama", policy);
  EXPECT_EQ(EndOfStep(bf16.prediction), EndOfStep(fp32.prediction));
  EXPECT_LT(bf16.prediction.allocated_peak_bytes, fp32.prediction.allocated_peak_bytes);
  // The bf16 casts of the shards are weight casts, each freed once its all-gather ran;
  // without a policy there are none (fp32, no autocast).
  const auto casts = [](const StepPrediction& p) {
    int64_t allocated = 0, live = 0;
    for (const MemoryEvent& e : p.timeline.events) {
      if (e.category != Category::kWeightCasts) continue;
      const bool alloc = e.kind == MemoryEvent::Kind::kAlloc;
      allocated += alloc ? e.bytes : 0;
      live += alloc ? e.bytes : -e.bytes;
    }
    return std::pair{allocated, live};
  };
  EXPECT_EQ(casts(fp32.prediction), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_GT(casts(bf16.prediction).first, 0);
  EXPECT_EQ(casts(bf16.prediction).second, 0);
  // reduce_dtype bf16: the sharded gradients are cast back to fp32, so they end as fp32
  // shards either way.
  policy.fsdp_reduce_dtype = DType::kBF16;
  EXPECT_EQ(EndOfStep(PredictTiny("tiny-llama", policy).prediction), EndOfStep(fp32.prediction));
}

// ZeRO-3's modules: those holding parameters, named after them, each preceded by the
// containers it opens (a ModuleList is never called; the model itself is counted apart).
TEST(ShardLayout, ZeroThreeCallsEachModuleAfterTheContainersItOpens) {
  TrainingConfig c;
  c.precision = Precision::kFp32;
  c.parallel = {.gpus = 4, .sharding = Sharding::kZero3};
  const OpGraph graph = *BuildGraph(*ResolveModel("tiny-llama"), GraphOptionsOf(c));
  const TensorStates states(graph, RegimeOf(c.precision), CostTargetOf(c));
  const std::vector<TensorId> params = graph.Parameters();
  std::vector<int64_t> bytes(graph.num_tensors(), 0);
  for (TensorId p : params) bytes[p.value] = 4 * graph.tensor(p).shape.Numel({});
  const Zero3Layout z = LayoutZero3(graph, states, params, bytes, c.parallel);
  // embed, 2 x (2 norms, q, k, v, o, gate, up, down), the final norm, the head.
  ASSERT_EQ(z.modules.size(), 21u);
  EXPECT_EQ(z.root_containers, 1);
  std::vector<int> forward, backward;
  for (const Zero3Module& m : z.modules) {
    forward.push_back(m.containers_before_forward);
    backward.push_back(m.containers_before_backward);
  }
  // Forward: `model` before the embedding; a block before its first norm; self_attn
  // before q; mlp before gate. Backward, from the head: `model` before the final norm,
  // the block and its mlp before down_proj, self_attn before o_proj.
  const std::vector<int> block_forward = {1, 1, 0, 0, 0, 0, 1, 0, 0};
  const std::vector<int> block_backward = {0, 0, 0, 0, 1, 0, 0, 0, 2};
  std::vector<int> want_forward = {1}, want_backward = {0};
  for (int layer = 0; layer < 2; ++layer) {
    want_forward.insert(want_forward.end(), block_forward.begin(), block_forward.end());
    want_backward.insert(want_backward.end(), block_backward.begin(), block_backward.end());
  }
  want_forward.insert(want_forward.end(), {0, 0});
  want_backward.insert(want_backward.end(), {1, 0});
  EXPECT_EQ(forward, want_forward);
  EXPECT_EQ(backward, want_backward);
  // The embedding reads token ids: no post-backward hook. Every block module has one.
  EXPECT_FALSE(z.modules.front().post_backward);
  EXPECT_TRUE(z.modules[1].post_backward);
  // 512 x 64 = 32768 elements: persistent under the default 1e5 threshold, a quarter
  // each; one optimizer sub-group of a quarter of every parameter.
  EXPECT_TRUE(z.persistent.front());
  EXPECT_EQ(z.partition_numel.front(), 8192);
  ASSERT_EQ(z.sub_group_numel.size(), 1u);
  EXPECT_EQ(z.sub_group_numel.front(), graph.ParameterCount() / 4);
}

// Between steps a ZeRO-3 rank holds its partitions, the fp32 partitions, the gradient
// partitions and AdamW's two states over them (a quarter of everything each), the
// reduce bucket, and the persistent parameters gathered whole.
TEST(ShardLayout, ZeroThreeKeepsPartitionsTheBucketAndThePersistentParameters) {
  const TinyRun one = PredictTiny("tiny-llama", {});
  const int64_t p = one.prediction.params_trainable;  // every dim divides by 4
  // One rank: weights, two states and one step tensor per parameter, and the buffers.
  const int64_t buffers = EndOfStep(one.prediction) - 12 * p - 4 * one.num_params;
  Parallelism zero3{.gpus = 4, .sharding = Sharding::kZero3};
  zero3.deepspeed.reduce_bucket_size = 1000;
  const int64_t partitions = p / 4 * 4;                          // bytes of a quarter, fp32
  const int64_t kept = 5 * partitions + 4 * 1000 + 4 + buffers;  // one flat step tensor
  EXPECT_EQ(EndOfStep(PredictTiny("tiny-llama", zero3).prediction), kept + 4 * p);
  zero3.deepspeed.stage3_param_persistence_threshold = 0;
  const StepPrediction none_persistent = PredictTiny("tiny-llama", zero3).prediction;
  EXPECT_EQ(EndOfStep(none_persistent), kept);
  EXPECT_LT(none_persistent.allocated_peak_bytes, one.prediction.allocated_peak_bytes);
  // Offloading with ZeRO-3 is refused until it is replayed.
  zero3.offload = Offload::kOptimizer;
  EXPECT_TRUE(ValidateParallelism(zero3));
}

TEST(ShardLayout, OffloadNeedsAnEngineThatOffloads) {
  EXPECT_TRUE(
      ValidateParallelism({.gpus = 2, .sharding = Sharding::kDdp, .offload = Offload::kOptimizer}));
  EXPECT_TRUE(ValidateParallelism(
      {.gpus = 2, .sharding = Sharding::kFsdp, .offload = Offload::kOptimizer}));
  EXPECT_TRUE(ValidateParallelism(
      {.gpus = 2, .sharding = Sharding::kZero2, .offload = Offload::kOptimizerAndParams}));
  EXPECT_FALSE(ValidateParallelism(
      {.gpus = 2, .sharding = Sharding::kFsdp, .offload = Offload::kOptimizerAndParams}));
  EXPECT_FALSE(ValidateParallelism(
      {.gpus = 2, .sharding = Sharding::kZero2, .offload = Offload::kOptimizer}));
  EXPECT_TRUE(ValidateParallelism({.gpus = 2, .sharding = Sharding::kZero2, .rank = 2}));
}

TEST(CommTime, RingVolumesAndOverlap) {
  DeviceSpec gpu = *FindGpu("h100-80gb");
  const CommVolume v{.param_bytes = 1e9, .trainable_bytes = 1e9};
  const Parallelism ddp{.gpus = 8, .sharding = Sharding::kDdp};
  // All-reduce: 2 x 7/8 of 1 GB through 450 GB/s at 0.65.
  const double all_reduce = 2 * 7.0 / 8 * 1e9 / (450e9 * 0.65);
  EXPECT_NEAR(EstimateComm(ddp, v, 1, 0, 0, gpu).total_seconds, all_reduce, 1e-12);
  EXPECT_NEAR(EstimateComm(ddp, v, 1, 0, 1.0, gpu).exposed_seconds, 0, 1e-12);  // hidden
  const Parallelism fsdp{.gpus = 16, .nodes = 2, .sharding = Sharding::kFsdp};
  // Across nodes: 50 GB/s at 0.9; per micro-batch two gathers and a reduce-scatter.
  const double one = 15.0 / 16 * 1e9 / (50e9 * 0.9);
  EXPECT_NEAR(EstimateComm(fsdp, v, 2, 0, 0, gpu).total_seconds, 2 * 3 * one, 1e-12);
  EXPECT_EQ(EstimateComm({}, v, 1, 0, 0, gpu).total_seconds, 0);
  // ZeRO-2: an all-reduce per micro-step, hidden by a long enough backward, and one
  // all-gather after the update, never hidden.
  const Parallelism zero2{.gpus = 8, .sharding = Sharding::kZero2};
  const double gather = 7.0 / 8 * 1e9 / (450e9 * 0.65);
  EXPECT_NEAR(EstimateComm(zero2, v, 2, 0, 0, gpu).total_seconds, 2 * all_reduce + gather, 1e-12);
  EXPECT_NEAR(EstimateComm(zero2, v, 2, 0, 10.0, gpu).exposed_seconds, gather, 1e-12);
  // ZeRO-3 gathers for forward and again for backward, and reduce-scatters, as FSDP.
  const Parallelism zero3{.gpus = 8, .sharding = Sharding::kZero3};
  EXPECT_NEAR(EstimateComm(zero3, v, 1, 0, 0, gpu).total_seconds, 3 * gather, 1e-12);
}

TEST(GpuCount, LadderIsPowersOfTwoThenWholeNodes) {
  EXPECT_EQ(GpuCountLadder(40), (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 40}));
  // Past 1024 GPUs by 8 nodes, past 8192 by 64: the 65536 bound is ~350 counts, not 8192.
  const std::vector<int64_t> big = GpuCountLadder(65536);
  EXPECT_EQ(big.size(), 4u + 127u + 112u + 112u);
  EXPECT_EQ(big[130], 1024);
  EXPECT_EQ(big[131], 1088);
  EXPECT_EQ(big.back(), 65536);
  EXPECT_EQ(big[242], 8192);
  EXPECT_EQ(big[243], 8704);
  EXPECT_EQ(ParallelismFor(24, Sharding::kFsdp).nodes, 3);
  EXPECT_EQ(ParallelismFor(1, Sharding::kFsdp).sharding, Sharding::kNone);
}

TEST(CliManyGpus, AutoFindsTheFewestRanksAndTheNextCountDoesNotFit) {
  const std::string request =
      "plan --model llama-3-70b --gpu h100-80gb --precision mixed-bf16 --seq-len 4096 --json";
  const CommandResult r = RunCli(request + " --global-batch 64 --gpus auto");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["fits"].get<bool>());
  const int64_t gpus = j["plan"]["gpus"];
  const std::string sharding = j["plan"]["sharding"];
  EXPECT_GT(gpus, 8);
  EXPECT_EQ(j["peak"]["per_rank"]["device_bytes"], j["peak"]["device_bytes"]);
  // The count below on the ladder, with the same scheme and sequences per rank, does not
  // fit (the ladder holds the counts that divide 64: 16, 32, 64 beyond a node).
  ASSERT_EQ(64 % gpus, 0);
  const int64_t fewer = gpus / 2;
  const CommandResult below = RunCli(request + " --global-batch " + std::to_string(64 / 2) +
                                     " --gpus " + std::to_string(fewer) + " --nodes " +
                                     std::to_string(fewer / 8) + " --sharding " + sharding);
  EXPECT_FALSE(nlohmann::json::parse(below.out)["fits"].get<bool>()) << below.err;
}

std::string WriteShardedPlan() {
  const std::string path = testing::TempDir() + "/sharded_plan.yaml";
  const CommandResult plan = RunCli(
      "plan --model tiny-llama --device cpu --seq-len 64 --gpus 4 --sharding zero1 "
      "--ddp-bucket-view --global-batch 8 -o " +
      path + " --json");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  return path;
}

TEST(CliManyGpus, PlanFilesKeepTheRanks) {
  std::ifstream in(WriteShardedPlan());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Result<PlanFile> file = ParsePlanYaml(text, "sharded_plan.yaml");
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->config.parallel,
            (Parallelism{.gpus = 4, .sharding = Sharding::kZero1, .ddp_bucket_view = true}));
  EXPECT_EQ(file->global_batch, 8);
}

#if HEADROOM_WITH_TORCH
TEST(CliManyGpus, TrainRefusesManyRanks) {
  const CommandResult train =
      RunCli("train --model tiny-gpt2 --device cpu --gpus 2 --sharding ddp --steps 1");
  EXPECT_EQ(train.exit_code, 2);
  EXPECT_NE(train.err.find("--emit"), std::string::npos) << train.err;
  const CommandResult again = RunCli("train --plan " + WriteShardedPlan() + " --steps 1");
  EXPECT_EQ(again.exit_code, 2);  // the plan file kept the 4 ranks, so train refuses it
  EXPECT_NE(again.err.find("zero1 over 4 ranks"), std::string::npos) << again.err;
}
#endif

// QLoRA over FSDP2 or ZeRO-3 is not replayed: the explicit flag refuses it, and no search
// path may choose it (issue 39: `--gpus auto` once said "FITS" for 70B QLoRA on 2 RTX
// 4090s with fsdp-no-reshard, at 6 GiB of weights per rank against a 37 GiB NF4 base).
// QLoRA over FSDP2 (bitsandbytes' bf16 quant storage): the packed 4-bit weights are
// sharded, their QuantState is whole on every rank. ZeRO-3 over NF4 is not modelled: no
// search chooses it, and the flag is refused.
TEST(CliManyGpus, QloraIsShardedByFsdpAndNeverByZero3) {
  const std::string qlora = "--model llama-3-70b --gpu rtx-4090 --qlora --seq-len 2048";
  // 70.59e9 parameters, 2.10e9 of them the bf16 embedding and head: the rest as NF4 is
  // 34.2e9 packed bytes (sharded) and 1.07e9 bytes of absmax (one byte per 64, whole).
  const double packed = (70.59e9 - 2.10e9) / 2, absmax = (70.59e9 - 2.10e9) / 64;
  for (const std::string gpus : {"--gpus auto", "--gpus 4", "--gpus 16 --nodes 2"}) {
    const CommandResult r = RunCli("plan " + qlora + " " + gpus + " --json");
    ASSERT_EQ(r.exit_code, 0) << gpus << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const std::string sharding = j["plan"]["sharding"];
    EXPECT_EQ(sharding.find("fsdp"), 0u) << gpus;
    const int64_t ranks = j["plan"]["gpus"];
    EXPECT_GT(j["breakdown"]["weights_bytes"].get<double>(), packed / ranks + absmax) << gpus;
    if (gpus == "--gpus auto") {  // 2 x 24 GB cannot hold 34 GB of shards: 4 can
      EXPECT_TRUE(j["fits"].get<bool>());
      EXPECT_EQ(ranks, 4);
    }
  }
  // The export says how the base must be loaded for the plan to hold.
  const CommandResult exported =
      RunCli("plan " + qlora + " --gpus 4 --sharding fsdp --emit accelerate-fsdp");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.out.find("bnb_4bit_quant_storage=torch.bfloat16"), std::string::npos);
  const CommandResult zero3 = RunCli("plan " + qlora + " --gpus 4 --sharding zero3");
  EXPECT_EQ(zero3.exit_code, 2);
  EXPECT_NE(zero3.err.find("not modelled"), std::string::npos) << zero3.err;
  const CommandResult capacity = RunCli(
      "capacity --model llama-3-70b --qlora --seq-len 2048 --gpu-types rtx-4090,a100-80gb "
      "--max-gpus 16 --tokens 1e8 --json");
  ASSERT_EQ(capacity.exit_code, 0) << capacity.err;
  const auto j = nlohmann::json::parse(capacity.out);
  EXPECT_EQ(j["min_gpus"]["rtx-4090"], 4) << j["min_gpus"].dump();
  for (const auto& row : j["configurations"]) {
    if (row["plan"].is_null()) continue;
    EXPECT_NE(row["plan"]["sharding"], "zero3") << row.dump();
  }
}

// HF Trainer's ZeRO is DeepSpeed's: bf16 parameters with fp32 master weights, as
// --emit deepspeed plans it, and a search for --emit hf tries no ZeRO scheme.
TEST(CliManyGpus, HfTrainerZeroRunsDeepSpeedsPrecision) {
  const std::string request =
      "plan --model llama-3-8b --gpu h100-80gb --seq-len 2048 --gpus 8 --precision amp-bf16";
  const CommandResult hf = RunCli(request + " --sharding zero2 --emit hf");
  ASSERT_EQ(hf.exit_code, 0) << hf.err;
  EXPECT_NE(hf.err.find("planned with mixed-bf16"), std::string::npos) << hf.err;
  const auto args = nlohmann::json::parse(hf.out);
  EXPECT_TRUE(args["bf16"].get<bool>());
  EXPECT_TRUE(args["deepspeed"]["bf16"]["enabled"].get<bool>());
  const CommandResult ds = RunCli(request + " --sharding zero2 --emit deepspeed");
  ASSERT_EQ(ds.exit_code, 0) << ds.err;
  EXPECT_EQ(nlohmann::json::parse(ds.out)["train_micro_batch_size_per_gpu"],
            args["per_device_train_batch_size"]);
  const CommandResult searched = RunCli(request + " --emit hf");
  ASSERT_EQ(searched.exit_code, 0) << searched.err;
  EXPECT_FALSE(nlohmann::json::parse(searched.out).contains("deepspeed")) << searched.out;
}

// accelerate sets FSDP2's MixedPrecisionPolicy from its mixed_precision: HF Trainer's
// bf16=True (amp-bf16 here) runs bf16 gathers over fp32 shards, without torch.autocast;
// a bare PyTorch loop has no policy unless one is given (--fsdp-param-dtype).
TEST(CliManyGpus, FsdpPrecisionFollowsTheStack) {
  const std::string request =
      "plan --model llama-3-8b --gpu h100-80gb --precision amp-bf16 --seq-len 2048 "
      "--micro-batch 1 --gpus 8 --sharding fsdp --checkpoint all --json";
  const auto policy = [&](const std::string& extra) {
    const CommandResult r = RunCli(request + extra);
    EXPECT_EQ(r.exit_code, 0) << extra << ": " << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto trainer = policy(" --stack hf-trainer");
  EXPECT_EQ(trainer["plan"]["fsdp_param_dtype"], "bf16");
  EXPECT_EQ(trainer["plan"]["fsdp_reduce_dtype"], "bf16");
  EXPECT_FALSE(trainer["plan"]["autocast"].get<bool>());
  EXPECT_EQ(trainer["breakdown"]["weight_casts_bytes"], 0);
  const auto bare = policy("");
  EXPECT_FALSE(bare["plan"].contains("fsdp_param_dtype"));
  EXPECT_TRUE(bare["plan"]["autocast"].get<bool>());
  // Under autocast each gathered fp32 weight's bf16 cast is cached until the forward ends.
  EXPECT_GT(bare["breakdown"]["weight_casts_bytes"].get<int64_t>(), int64_t{1} << 30);
  const auto given = policy(" --fsdp-param-dtype bf16 --fsdp-reduce-dtype fp32");
  EXPECT_EQ(given["plan"]["fsdp_param_dtype"], "bf16");
  EXPECT_EQ(given["plan"]["fsdp_reduce_dtype"], "fp32");
  EXPECT_LT(given["peak"]["allocated_bytes"], bare["peak"]["allocated_bytes"]);
  std::string ddp = request;
  ddp.replace(ddp.find("--sharding fsdp"), 15, "--sharding ddp");
  for (const std::string& bad :
       {request + " --fsdp-reduce-dtype bf16", request + " --fsdp-param-dtype int8",
        ddp + " --fsdp-param-dtype bf16"}) {
    const CommandResult r = RunCli(bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("fsdp"), std::string::npos) << bad << ": " << r.err;
  }
}

// Issue 39's request: HF Trainer's FSDP2 runs accelerate's bf16 policy, so no fp32->bf16
// weight casts are held (under autocast they were 129 GiB a rank and nothing fit at 1024
// H100s), and the stated global batch of 64 is kept (it once came back 72: 24 x 3).
TEST(CliManyGpus, AutoKeepsTheStatedGlobalBatchWithAcceleratesPolicy) {
  const CommandResult r = RunCli(
      "plan --model llama-3-70b --gpu h100-80gb --gpus auto --stack hf-trainer --seq-len 4096 "
      "--global-batch 64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["fits"].get<bool>());
  const auto& plan = j["plan"];
  EXPECT_EQ(plan["global_batch"], 64);
  EXPECT_EQ(plan["gpus"].get<int64_t>() * plan["micro_batch"].get<int64_t>() *
                plan["grad_accum_steps"].get<int64_t>(),
            64);
  EXPECT_EQ(j["breakdown"]["weight_casts_bytes"], 0);
  EXPECT_EQ(plan["nodes"].get<int64_t>() * kGpusPerNode, plan["gpus"].get<int64_t>());
  EXPECT_FALSE(j["solver"].contains("batch_note")) << j["solver"].dump();
}

TEST(CliManyGpus, AStatedGlobalBatchIsNeverRounded) {
  // A stated count that cannot split it: refused, naming the batches it could run.
  const CommandResult split =
      RunCli("plan --model llama-3-8b --gpu h100-80gb --gpus 24 --seq-len 2048 --global-batch 64");
  EXPECT_EQ(split.exit_code, 2);
  EXPECT_NE(split.err.find("the nearest that can are 48 and 72"), std::string::npos) << split.err;
  // --gpus auto where only 1 and 7 divide the batch and neither fits: no plan, and the
  // nearest batches that do fit are named (70B full needs more than 8 H100s).
  const CommandResult seven = RunCli(
      "plan --model llama-3-70b --gpu h100-80gb --gpus auto --stack hf-trainer --seq-len 4096 "
      "--global-batch 7 --json");
  ASSERT_EQ(seven.exit_code, 0) << seven.err;
  const auto j = nlohmann::json::parse(seven.out);
  EXPECT_FALSE(j["fits"].get<bool>());
  const std::string note = j["solver"]["batch_note"];
  EXPECT_NE(note.find("divides the global batch 7"), std::string::npos) << note;
  EXPECT_NE(note.find("16 (16 GPUs x 1)"), std::string::npos) << note;
}

// A count beyond one node is spread over the fewest nodes of at most 8 that hold it
// evenly, and the exports say as many machines.
TEST(CliManyGpus, ManyGpusImplyWholeNodes) {
  EXPECT_EQ(DefaultNodes(1), 1);
  EXPECT_EQ(DefaultNodes(8), 1);
  EXPECT_EQ(DefaultNodes(16), 2);
  EXPECT_EQ(DefaultNodes(12), 2);  // 2 x 6
  EXPECT_EQ(DefaultNodes(24), 3);
  EXPECT_EQ(DefaultNodes(10), 2);  // 2 x 5
  EXPECT_EQ(DefaultNodes(17), 17);
  const CommandResult r = RunCli(
      "plan --model llama-3-8b --gpu h100-80gb --gpus 16 --seq-len 2048 --global-batch 64 "
      "--emit accelerate-fsdp");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("num_machines: 2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("num_processes: 16\n"), std::string::npos) << r.out;
  const CommandResult text = RunCli(
      "plan --model llama-3-8b --gpu h100-80gb --gpus 16 --sharding fsdp --micro-batch 1 "
      "--seq-len 2048");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("16 ranks (2 nodes x 8 GPUs; the time assumes 450 GB/s per GPU within a "
                          "node, 50 GB/s between nodes)"),
            std::string::npos)
      << text.out;
}

TEST(CliManyGpus, ExportOfAPlanThatDoesNotFitExitsTwo) {
  const CommandResult r =
      RunCli("plan --model llama-3-70b --gpu rtx-4090 --gpus 2 --sharding fsdp --emit deepspeed");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nothing to export"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace headroom
