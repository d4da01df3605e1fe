// A run saved after k steps and resumed continues bit for bit as if never stopped:
// weights (and fp32 master weights), optimizer moments, step count, data position and
// dropout RNG all restored.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/catalog.h"
#include "runtime/trainer.h"

namespace headroom {
namespace {

TrainingConfig Config(Precision precision = Precision::kAmpBf16) {
  TrainingConfig c;
  c.micro_batch = 2;
  c.grad_accum_steps = 2;
  c.seq_len = 16;
  c.precision = precision;
  c.optimizer = OptimizerKind::kAdamW;
  return c;
}

void ExpectResumesBitForBit(Precision precision) {
  SCOPED_TRACE(std::string(PrecisionName(precision)));
  // tiny-gpt2 has dropout (RNG) and one checkpointed block (RNG replay).
  const ModelSpec spec = *LoadCatalogModel("tiny-gpt2");
  // One file per test process and precision: ctest -j runs these tests side by side.
  const std::filesystem::path state =
      std::filesystem::temp_directory_path() /
      ("headroom_resume_" + std::to_string(::getpid()) + "_" +
       std::string(PrecisionName(precision)) + ".pt");
  std::vector<double> losses_uninterrupted, losses_resumed;
  Trainer uninterrupted(spec, Config(precision), {true, false}, {.seed = 7});
  for (int i = 0; i < 4; ++i) losses_uninterrupted.push_back(uninterrupted.Step().loss);
  {
    Trainer first(spec, Config(precision), {true, false}, {.seed = 7});
    for (int i = 0; i < 2; ++i) losses_resumed.push_back(first.Step().loss);
    first.SaveState(state);
    first.Step();  // moves on after saving: the resumed run must not see this
  }
  Trainer second(spec, Config(precision), {true, false}, {.seed = 7});
  second.LoadState(state);
  EXPECT_EQ(second.steps_done(), 2);
  for (int i = 0; i < 2; ++i) losses_resumed.push_back(second.Step().loss);

  EXPECT_EQ(losses_resumed, losses_uninterrupted);
  const auto a = uninterrupted.NamedParameters(), b = second.NamedParameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
  std::filesystem::remove(state);
}

TEST(Resume, ContinuesBitForBitWhereItStopped) { ExpectResumesBitForBit(Precision::kAmpBf16); }

TEST(Resume, ContinuesBitForBitWithMasterWeights) {
  ExpectResumesBitForBit(Precision::kMixedBf16);
}

TEST(Resume, RefusesTheStateOfAnotherRun) {
  const std::filesystem::path state =
      std::filesystem::temp_directory_path() /
      ("headroom_other_" + std::to_string(::getpid()) + ".pt");
  Trainer gpt2(*LoadCatalogModel("tiny-gpt2"), Config(), {false, false}, {.seed = 1});
  gpt2.SaveState(state);
  TrainingConfig other = Config();
  other.seq_len = 32;
  Trainer longer(*LoadCatalogModel("tiny-gpt2"), other, {false, false}, {.seed = 1});
  try {
    longer.LoadState(state);
    FAIL() << "loaded a state saved with another sequence length";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not this one"), std::string::npos) << e.what();
  }
  std::filesystem::remove(state);
}

}  // namespace
}  // namespace headroom
