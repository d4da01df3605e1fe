// Sizes cannot wrap: a request whose true size passes 2^64 is refused, never predicted as
// a small number, and the checked arithmetic under the simulator reports an overflow.
#include <cstdint>

#include <gtest/gtest.h>

#include "models/model_spec.h"
#include "planner/core/checked_math.h"
#include "planner/plan/plan_request.h"
#include "planner/simulate/step_size_bound.h"

namespace headroom {
namespace {

PlanRequest LongContext(int64_t micro_batch, int64_t seq_len) {
  ModelSpec spec{.name = "long-context", .family = ModelFamily::kLlama, .vocab_size = 32000,
                 .hidden_size = 4096, .num_layers = 64, .num_heads = 32,
                 .intermediate_size = 14336, .max_positions = int64_t{1} << 24};
  PlanRequest r{.model = *Validate(spec), .config = {}, .device = CpuDevice(int64_t{1} << 40)};
  r.config.micro_batch = micro_batch;
  r.config.seq_len = seq_len;
  return r;
}

TEST(SizeLimits, AStepPast64BitsIsRefusedNotPredicted) {
  // 2^20 sequences of 2^24 tokens of width 4096: about 2^70 bytes of activations.
  const Result<StepPrediction> huge = Predict(LongContext(int64_t{1} << 20, int64_t{1} << 24));
  ASSERT_FALSE(huge.ok()) << "predicted " << huge->allocated_peak_bytes << " bytes";
  EXPECT_NE(huge.error().message.find("too large to plan"), std::string::npos);
  const Result<StepPrediction> small = Predict(LongContext(1, 64));
  ASSERT_TRUE(small.ok()) << small.error().message;
  EXPECT_GT(small->allocated_peak_bytes, 0);
}

TEST(SizeLimits, CeilingGrowsWithTheBatchAndBoundsThePeak) {
  const PlanRequest r = LongContext(1, 64);
  const Result<OpGraph> graph = BuildGraph(r.model, GraphOptionsOf(r.config));
  ASSERT_TRUE(graph.ok());
  const double one = StepBytesCeiling(*graph, {1, 64});
  EXPECT_GT(StepBytesCeiling(*graph, {2, 64}), one);
  EXPECT_GT(one, static_cast<double>(Predict(r)->allocated_peak_bytes));
  EXPECT_TRUE(WithinStepSizeLimit(*graph, {1, 64}));
  EXPECT_FALSE(WithinStepSizeLimit(*graph, {int64_t{1} << 20, int64_t{1} << 24}));
}

TEST(SizeLimits, CheckedArithmeticThrowsInsteadOfWrapping) {
  EXPECT_EQ(CheckedMul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_THROW(CheckedMul(int64_t{1} << 32, int64_t{1} << 31), SizeOverflow);
  EXPECT_THROW(CheckedAdd(INT64_MAX, 1), SizeOverflow);
  EXPECT_THROW(StorageBytes(DType::kF32, int64_t{1} << 62), SizeOverflow);
}

TEST(SizeLimits, ModelSpecBoundsNameTheField) {
  ModelSpec spec{.name = "m", .family = ModelFamily::kLlama, .vocab_size = int64_t{1} << 62,
                 .hidden_size = 64, .num_layers = 2, .num_heads = 4, .intermediate_size = 176,
                 .max_positions = 256};
  const Result<ModelSpec> r = Validate(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("vocab_size"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace headroom
