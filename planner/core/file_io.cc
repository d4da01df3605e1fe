#include "planner/core/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <streambuf>
#include <system_error>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
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

// What a write to a path does (see file_io.h).
enum class OutputKind { kStdout, kDirect, kReplace };
struct OutputTarget {
  OutputKind kind;
  std::filesystem::path path;  // the file itself: a symlink's target, once followed
};

std::filesystem::path DirectoryOf(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
}

// /proc/self/fd/N and its kin are descriptors, not files: what they lead to is written
// through the descriptor, never replaced.
bool OnProcfs(const std::filesystem::path& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

// Follows symlinks at the last component (the kernel resolves the directories above it)
// to what a write should reach. Too many links is ELOOP, as open(2) says it.
Result<OutputTarget> ResolveOutput(const std::filesystem::path& path, AtSymlink at_symlink) {
  if (path == "-") return OutputTarget{OutputKind::kStdout, path};
  constexpr int kMaxLinks = 40;  // Linux's MAXSYMLINKS
  std::filesystem::path p = path;
  for (int links = 0; links <= kMaxLinks; ++links) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return OutputTarget{OutputKind::kReplace, p};
      return MakeError(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
    }
    if (S_ISLNK(st.st_mode) && at_symlink == AtSymlink::kWriteThrough) {
      const std::filesystem::path dir = DirectoryOf(p);
      if (OnProcfs(dir)) return OutputTarget{OutputKind::kDirect, p};
      std::error_code ec;
      const std::filesystem::path link = std::filesystem::read_symlink(p, ec);
      if (ec) return MakeError(fmt::format("cannot write {}: {}", path.string(), ec.message()));
      p = link.is_absolute() ? link : dir / link;
      continue;
    }
    if (S_ISLNK(st.st_mode) || S_ISREG(st.st_mode)) return OutputTarget{OutputKind::kReplace, p};
    if (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode))
      return NotRegular("write", path.string(), st.st_mode);
    return OutputTarget{OutputKind::kDirect, p};  // a device or a FIFO
  }
  return MakeError(fmt::format("cannot write {}: {}", path.string(), std::strerror(ELOOP)));
}

// An output stream over a descriptor that remembers the first failed write's errno.
class FdBuffer : public std::streambuf {
 public:
  explicit FdBuffer(int fd) : fd_(fd) { setp(buffer_, buffer_ + sizeof(buffer_)); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!Drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return Drain() ? 0 : -1; }

 private:
  bool Drain() {
    const char* p = pbase();
    while (p < pptr() && error_ == 0) {
      const ssize_t n = ::write(fd_, p, static_cast<size_t>(pptr() - p));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        error_ = errno;
      else
        p += n;
    }
    setp(buffer_, buffer_ + sizeof(buffer_));
    return error_ == 0;
  }

  int fd_;
  int error_ = 0;
  char buffer_[1 << 16];
};

// Runs `write` into `fd`; the errno of the first failure, or 0.
int WriteToFd(int fd, const std::function<void(std::ostream&)>& write) {
  FdBuffer buffer(fd);
  std::ostream out(&buffer);
  write(out);
  out.flush();
  if (buffer.error() != 0) return buffer.error();
  return out ? 0 : EIO;
}

// A temporary created exclusively, removed on every way out unless it was committed.
struct TempFile {
  std::filesystem::path path;
  int fd = -1;
  bool committed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!committed && !path.empty()) ::unlink(path.c_str());
  }
};

std::optional<Error> WriteToStdout(const std::function<void(std::ostream&)>& write) {
  write(std::cout);
  std::cout.flush();
  if (!std::cout) return MakeError("cannot write to stdout");
  return std::nullopt;
}

// A device, a FIFO or a descriptor: opened as it is and appended to, so what this
// process already printed to the same file is kept, in order.
std::optional<Error> WriteDirectly(const std::string& name, const std::filesystem::path& target,
                                   const std::function<void(std::ostream&)>& write) {
  std::cout.flush();
  std::fflush(stdout);
  const Fd file{::open(target.c_str(), O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC)};
  if (file.fd < 0) return MakeError(fmt::format("cannot write {}: {}", name, std::strerror(errno)));
  if (const int err = WriteToFd(file.fd, write); err != 0)
    return MakeError(fmt::format("cannot write {}: {}", name, std::strerror(err)));
  return std::nullopt;
}

// A regular file: a temporary made exclusively beside it, renamed over it when complete.
std::optional<Error> ReplaceAtomically(const std::string& name, const std::filesystem::path& target,
                                       const std::function<void(std::ostream&)>& write) {
  const auto failed = [&](int err) {
    return MakeError(fmt::format("cannot write {}: {}", name, std::strerror(err)));
  };
  TempFile tmp;
  for (int attempt = 0; attempt < 16 && tmp.fd < 0; ++attempt) {
    const std::filesystem::path candidate = TemporaryNameBeside(target);
    tmp.fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (tmp.fd >= 0) tmp.path = candidate;
    if (tmp.fd < 0 && errno != EEXIST) break;
  }
  if (tmp.fd < 0) return failed(errno);
  struct stat old {};
  if (::stat(target.c_str(), &old) == 0 && S_ISREG(old.st_mode))
    (void)::fchmod(tmp.fd, old.st_mode & 07777);  // a replaced file keeps its mode
  if (const int err = WriteToFd(tmp.fd, write); err != 0) return failed(err);
  if (::fsync(tmp.fd) != 0) return failed(errno);
  const int closed = ::close(tmp.fd);
  tmp.fd = -1;
  if (closed != 0) return failed(errno);
  if (::rename(tmp.path.c_str(), target.c_str()) != 0) return failed(errno);
  tmp.committed = true;
  return std::nullopt;
}

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
  Result<OutputTarget> target = ResolveOutput(path, AtSymlink::kWriteThrough);
  if (!target) return target.error();
  const std::string name = path.string();
  switch (target->kind) {
    case OutputKind::kStdout:
      return std::nullopt;
    case OutputKind::kDirect:
      if (::access(target->path.c_str(), W_OK) != 0)
        return MakeError(fmt::format("cannot write {}: {}", name, std::strerror(errno)));
      return std::nullopt;
    case OutputKind::kReplace:
      break;
  }
  const std::filesystem::path dir = DirectoryOf(target->path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return MakeError(
        fmt::format("cannot write {}: the directory {} does not exist", name, dir.string()));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return MakeError(fmt::format("cannot write {}: {}", name, std::strerror(errno)));
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

std::filesystem::path TemporaryNameBeside(const std::filesystem::path& target) {
  uint64_t bits = 0;
  size_t got = 0;
  while (got < sizeof(bits)) {
    const ssize_t n = ::getrandom(reinterpret_cast<char*>(&bits) + got, sizeof(bits) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "getrandom");
    got += static_cast<size_t>(n);
  }
  constexpr size_t kMaxKept = 200;  // of NAME_MAX's 255, leaving room for the rest
  const std::string name = target.filename().string().substr(0, kMaxKept);
  return DirectoryOf(target) / fmt::format(".{}.tmp-{:016x}", name, bits);
}

std::optional<Error> WriteFileAtomically(const std::filesystem::path& path,
                                         const std::function<void(std::ostream&)>& write,
                                         AtSymlink at_symlink) {
  if (path.empty()) return MakeError("cannot write to an empty path");
  Result<OutputTarget> target = ResolveOutput(path, at_symlink);
  if (!target) return target.error();
  switch (target->kind) {
    case OutputKind::kStdout:
      return WriteToStdout(write);
    case OutputKind::kDirect:
      return WriteDirectly(path.string(), target->path, write);
    case OutputKind::kReplace:
      break;
  }
  return ReplaceAtomically(path.string(), target->path, write);
}

std::optional<Error> WriteFileAtomically(const std::filesystem::path& path, const std::string& text,
                                         AtSymlink at_symlink) {
  return WriteFileAtomically(
      path, [&](std::ostream& out) { out << text; }, at_symlink);
}

}  // namespace headroom
