#include "planner/core/file_io.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace headroom {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "something else";
}

// "cannot read X: it is a FIFO, not a regular file".
Error NotRegular(const char* verb, const std::string& name, mode_t mode) {
  return MakeError(
      fmt::format("cannot {} {}: it is {}, not a regular file", verb, name, KindOf(mode)));
}

// Closes a descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<std::string> ReadRegularFile(const std::filesystem::path& path, int64_t max_bytes) {
  const std::string name = path.string();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the stat below rejects it.
  const Fd file{::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (file.fd < 0) return MakeError(fmt::format("cannot read {}: {}", name, std::strerror(errno)));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0)
    return MakeError(fmt::format("cannot read {}: {}", name, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return NotRegular("read", name, st.st_mode);
  if (st.st_size > max_bytes)
    return MakeError(fmt::format("cannot read {}: it is {} bytes, more than the {} allowed", name,
                                 st.st_size, max_bytes));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(file.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError(fmt::format("cannot read {}: {}", name, std::strerror(errno)));
    if (n == 0) break;  // shrank while reading
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

std::optional<Error> CheckRegularFile(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return MakeError(fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return NotRegular("read", path.string(), st.st_mode);
  return std::nullopt;
}

std::optional<Error> CheckWritableTarget(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return NotRegular("write", path.string(), st.st_mode);
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return MakeError(fmt::format("cannot write {}: the directory {} does not exist", path.string(),
                                 dir.string()));
  return std::nullopt;
}

std::optional<Error> CreateParentDirectories(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    return MakeError(fmt::format("cannot create the directory {}: {}", path.parent_path().string(),
                                 ec.message()));
  return std::nullopt;
}

std::optional<Error> WriteFileAtomically(const std::filesystem::path& path,
                                         const std::function<void(std::ostream&)>& write) {
  if (auto error = CheckWritableTarget(path)) return error;
  const std::string name = path.string();
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  auto fail = [&](int err) -> std::optional<Error> {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return MakeError(fmt::format("cannot write {}: {}", name, std::strerror(err)));
  };
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return fail(errno);
  errno = 0;
  try {
    write(out);
  } catch (...) {
    out.close();
    fail(0);
    throw;
  }
  if (out) out.flush();
  if (!out) return fail(errno != 0 ? errno : EIO);
  out.close();  // writes what the stream still buffers; a full disk can fail here
  if (out.fail()) return fail(errno != 0 ? errno : EIO);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return fail(ec.value());
  return std::nullopt;
}

std::optional<Error> WriteFileAtomically(const std::filesystem::path& path,
                                         const std::string& text) {
  return WriteFileAtomically(path, [&](std::ostream& out) { out << text; });
}

}  // namespace headroom
