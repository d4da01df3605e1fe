// Runs the `headroom` binary the tests were built with and captures what it printed.
#pragma once

#include <array>
#include <cstdio>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace headroom {

struct CommandResult {
  int exit_code;  // -1 when a signal ended it
  std::string out;
  std::string err;
};

inline CommandResult RunCli(const std::string& args) {
  // Per process: ctest -j runs these tests side by side.
  const std::string err_file =
      testing::TempDir() + "/headroom_cli_stderr_" + std::to_string(getpid()) + ".txt";
  // A hang is a failure (exit 124), not a stuck test.
  const std::string cmd =
      "timeout 120 " + std::string(HEADROOM_CLI_PATH) + " " + args + " 2>" + err_file;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  std::string err;
  if (FILE* f = fopen(err_file.c_str(), "r")) {
    while (size_t n = fread(buf.data(), 1, buf.size(), f)) err.append(buf.data(), n);
    fclose(f);
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err};
}

}  // namespace headroom
