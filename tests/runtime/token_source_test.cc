// Training data from files: uint16/uint32 token files and byte-level text become the
// right inputs and next-token labels; files that cannot serve the model are errors.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/token_source.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;

template <typename T>
fs::path WriteIds(const std::string& name, const std::vector<T>& ids) {
  const fs::path file = fs::temp_directory_path() / name;
  std::ofstream(file, std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(T)));
  return file;
}

TEST(TokenSource, Uint16FileYieldsConsecutiveWindows) {
  std::vector<uint16_t> ids(100);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>(60000 + i);
  const auto source = OpenTokenFile(WriteIds("headroom_u16.bin", ids), TokenFileFormat::kUint16, 65536, 9);
  EXPECT_TRUE(torch::equal(source->Sample(0, 9), torch::arange(60000, 60009, torch::kLong)));
  EXPECT_TRUE(torch::equal(source->Sample(2, 9), torch::arange(60018, 60027, torch::kLong)));
  // 99 / 9 = 11 windows, then it wraps.
  EXPECT_TRUE(torch::equal(source->Sample(11, 9), source->Sample(0, 9)));
}

TEST(TokenSource, Uint32FileChecksTheVocabulary) {
  const fs::path file = WriteIds<uint32_t>("headroom_u32.bin", {1, 2, 70000, 3, 4});
  EXPECT_EQ(OpenTokenFile(file, TokenFileFormat::kUint32, 70001, 2)->Sample(1, 2)[0].item<int64_t>(), 70000);
  try {
    OpenTokenFile(file, TokenFileFormat::kUint32, 50257, 2);
    FAIL() << "accepted id 70000 for a vocabulary of 50257";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("position 2"), std::string::npos) << e.what();
  }
  // 5 bytes are not a whole number of 16-bit ids.
  fs::resize_file(file, 5);
  EXPECT_THROW(OpenTokenFile(file, TokenFileFormat::kUint16, 70001, 2), std::runtime_error);
}

TEST(TokenSource, TextIsTokenizedByByte) {
  const fs::path file = fs::temp_directory_path() / "headroom_text.txt";
  std::ofstream(file) << "hello, world";
  const auto source = OpenTokenFile(file, TokenFileFormat::kText, 256, 5);
  const at::Tensor first = source->Sample(0, 5);
  EXPECT_EQ(first[0].item<int64_t>(), 'h');
  EXPECT_EQ(first[4].item<int64_t>(), 'o');
  EXPECT_EQ(source->Sample(1, 5)[0].item<int64_t>(), ',');
  EXPECT_THROW(OpenTokenFile(file, TokenFileFormat::kText, 100, 5), std::runtime_error);
  EXPECT_THROW(OpenTokenFile(file, TokenFileFormat::kText, 256, 50), std::runtime_error);
}

TEST(TokenSource, SyntheticSamplesDependOnlyOnTheirIndex) {
  const auto a = MakeSyntheticTokens(1000, 5), b = MakeSyntheticTokens(1000, 5);
  b->Sample(0, 8);  // drawing others first changes nothing
  EXPECT_TRUE(torch::equal(a->Sample(3, 8), b->Sample(3, 8)));
  const at::Tensor s = a->Sample(3, 8);
  EXPECT_TRUE(torch::equal((s.slice(0, 1) - s.slice(0, 0, 7)).remainder(1000), torch::ones({7}, torch::kLong)));
}

}  // namespace
}  // namespace headroom
