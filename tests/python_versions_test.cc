// The package versions that key the import cache are asked of Python once, then read
// back while the directories Python loads packages from are unchanged (models/
// python_versions.h). A stand-in interpreter (a shell script) counts its starts.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "models/python_versions.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(PythonVersions, AskedOnceThenReadBackUntilAPackageDirectoryChanges) {
  const fs::path dir =
      fs::path(testing::TempDir()) / ("python_versions_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "site");
  const fs::path starts = dir / "starts";
  const fs::path python = dir / "python";
  {
    std::ofstream script(python);
    script << "#!/bin/sh\necho started >> '" << starts.string() << "'\n"
           << "echo '2.15.0 5.24.0 0.21.2'\necho '[\"" << (dir / "site").string() << "\"]'\n";
  }
  fs::permissions(python, fs::perms::owner_all);
  const auto ask = [&] {
    return InstalledPackageVersions(python.string(), dir, {}, dir / "cache");
  };
  Result<std::string> first = ask();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(*first, "2.15.0 5.24.0 0.21.2");
  Result<std::string> second = ask();
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(ReadAll(starts), "started\n");  // the second answer was read back
  // A package installed: its directory's time moves, and Python is asked again.
  fs::last_write_time(dir / "site", fs::last_write_time(dir / "site") + std::chrono::seconds(5));
  ASSERT_TRUE(ask());
  EXPECT_EQ(ReadAll(starts), "started\nstarted\n");
  // Another set of kernel packages is another question.
  ASSERT_TRUE(InstalledPackageVersions(python.string(), dir, {"fla"}, dir / "cache"));
  EXPECT_EQ(ReadAll(starts), "started\nstarted\nstarted\n");
  fs::remove_all(dir);
}

TEST(PythonVersions, AnInterpreterThatFailsIsAnErrorNamingItsLastLine) {
  const fs::path dir = fs::path(testing::TempDir()) / ("python_fails_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path python = dir / "python";
  {
    std::ofstream script(python);
    script << "#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n";
  }
  fs::permissions(python, fs::perms::owner_all);
  Result<std::string> versions = InstalledPackageVersions(python.string(), dir, {}, dir / "cache");
  ASSERT_FALSE(versions);
  EXPECT_EQ(versions.error().message, "ModuleNotFoundError: No module named torch");
  EXPECT_FALSE(fs::exists(dir / "cache"));  // nothing kept for a failed answer
  fs::remove_all(dir);
}

}  // namespace
}  // namespace headroom
