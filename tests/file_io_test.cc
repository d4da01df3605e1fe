// planner/core/file_io.h: where a write goes. The CLI's own cases (a symlink to
// /proc/self/fd/1, a FIFO, a planted temporary) are in tests/output_paths_test.sh.
#include "planner/core/file_io.h"

#include <set>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace headroom {
namespace {

namespace fs = std::filesystem;

class FileIo : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/headroom-file-io-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Read(const fs::path& p) { return ReadRegularFile(p).value(); }
  // Entries of the directory, so a test can see that no temporary was left.
  std::set<std::string> Entries() {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.insert(e.path().filename());
    return names;
  }
  fs::path dir_;
};

TEST_F(FileIo, TemporaryNamesDifferAndCarryNoPid) {
  std::set<std::string> names;
  for (int i = 0; i < 1000; ++i) {
    const fs::path name = TemporaryNameBeside(dir_ / "x");
    EXPECT_EQ(name.parent_path(), dir_);
    names.insert(name.filename());
  }
  EXPECT_EQ(names.size(), 1000u);
  for (const std::string& n : names) {
    EXPECT_EQ(n.rfind(".x.tmp-", 0), 0u) << n;
    EXPECT_EQ(n.size(), std::string(".x.tmp-").size() + 16) << n;
    // The old, guessable scheme was TARGET.tmp.<pid>. The 16 hex digits are random:
    // they may hold the pid's digits by chance, so only the suffix's form is checked.
    const std::string suffix = n.substr(std::string(".x.tmp-").size());
    EXPECT_EQ(suffix.find_first_not_of("0123456789abcdef"), std::string::npos) << n;
    EXPECT_NE(suffix, std::to_string(::getpid())) << n;
  }
}

TEST_F(FileIo, ALongNameStillWrites) {
  const std::string name(250, 'n');  // within NAME_MAX; its temporary must be too
  ASSERT_FALSE(WriteFileAtomically(dir_ / name, std::string("x")));
  EXPECT_EQ(Read(dir_ / name), "x");
  EXPECT_LE(TemporaryNameBeside(dir_ / name).filename().string().size(), 255u);
}

TEST_F(FileIo, ASymlinkIsWrittenThroughToItsTarget) {
  ASSERT_FALSE(WriteFileAtomically(dir_ / "target", std::string("old")));
  fs::create_symlink("target", dir_ / "link");
  ASSERT_FALSE(WriteFileAtomically(dir_ / "link", std::string("new")));
  EXPECT_TRUE(fs::is_symlink(dir_ / "link"));
  EXPECT_EQ(Read(dir_ / "target"), "new");
  EXPECT_EQ(Entries(), (std::set<std::string>{"link", "target"}));
}

TEST_F(FileIo, ACacheWriteReplacesALinkInsteadOfFollowingIt) {
  ASSERT_FALSE(WriteFileAtomically(dir_ / "victim", std::string("victim")));
  fs::create_symlink("victim", dir_ / "blob");
  ASSERT_FALSE(WriteFileAtomically(dir_ / "blob", std::string("data"), AtSymlink::kReplace));
  EXPECT_FALSE(fs::is_symlink(dir_ / "blob"));
  EXPECT_EQ(Read(dir_ / "blob"), "data");
  EXPECT_EQ(Read(dir_ / "victim"), "victim");
}

TEST_F(FileIo, ALinkLoopIsAnError) {
  fs::create_symlink("b", dir_ / "a");
  fs::create_symlink("a", dir_ / "b");
  const auto error = WriteFileAtomically(dir_ / "a", std::string("x"));
  ASSERT_TRUE(error);
  EXPECT_NE(error->message.find("Too many levels of symbolic links"), std::string::npos)
      << error->message;
}

TEST_F(FileIo, AThrowingWriterLeavesNoTemporaryAndTheOldFile) {
  ASSERT_FALSE(WriteFileAtomically(dir_ / "f", std::string("old")));
  EXPECT_THROW((void)WriteFileAtomically(dir_ / "f",
                                         [](std::ostream& out) {
                                           out << "partial";
                                           throw std::runtime_error("boom");
                                         }),
               std::runtime_error);
  EXPECT_EQ(Read(dir_ / "f"), "old");
  EXPECT_EQ(Entries(), std::set<std::string>{"f"});
}

TEST_F(FileIo, ADirectoryOrAnEmptyPathIsRefused) {
  EXPECT_TRUE(CheckWritableTarget(dir_));
  EXPECT_TRUE(WriteFileAtomically(dir_, std::string("x")));
  EXPECT_TRUE(WriteFileAtomically("", std::string("x")));
  EXPECT_TRUE(CheckWritableTarget(dir_ / "no" / "such" / "file"));
  EXPECT_FALSE(CheckWritableTarget(dir_ / "new-file"));
  EXPECT_FALSE(CheckWritableTarget("-"));
  EXPECT_FALSE(CheckWritableTarget("/dev/null"));
}

TEST_F(FileIo, ACharacterDeviceIsWrittenDirectly) {
  // /dev/null stays /dev/null; the old code refused it, and would have renamed over it.
  EXPECT_FALSE(WriteFileAtomically("/dev/null", std::string("discarded")));
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  const auto full = WriteFileAtomically("/dev/full", std::string("x"));
  ASSERT_TRUE(full);
  EXPECT_NE(full->message.find("No space left on device"), std::string::npos) << full->message;
}

}  // namespace
}  // namespace headroom
