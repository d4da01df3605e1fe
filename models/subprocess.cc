#include "models/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

extern char** environ;

namespace headroom {
namespace {

// Closes what it holds on every path out.
struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd) {
      if (f >= 0) close(f);
    }
  }
  void CloseEnd(int end) {
    if (fd[end] >= 0) close(fd[end]);
    fd[end] = -1;
  }
};

}  // namespace

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const std::function<void(std::string_view)>& on_error_line) {
  Pipe out, err;
  if (pipe2(out.fd, O_CLOEXEC) != 0 || pipe2(err.fd, O_CLOEXEC) != 0)
    return MakeError(fmt::format("cannot run {}: {}", argv.at(0), std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    return MakeError(fmt::format("cannot run {}: {}", argv.at(0), std::strerror(spawned)));
  out.CloseEnd(1);
  err.CloseEnd(1);
  ProcessResult result;
  std::string pending;  // stderr's unfinished line
  const auto error_line = [&](std::string_view line) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
    result.last_error_line = std::string(line);
    if (on_error_line) on_error_line(line);
  };
  pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
  int open_fds = 2;
  char buffer[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      if (i == 0) {
        result.out.append(buffer, static_cast<size_t>(n));
        continue;
      }
      pending.append(buffer, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1))
        error_line(std::string_view(pending).substr(0, nl));
    }
  }
  error_line(pending);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace headroom
