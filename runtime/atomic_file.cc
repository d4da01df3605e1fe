#include "runtime/atomic_file.h"

#include <fstream>
#include <stdexcept>

#include <unistd.h>

namespace headroom {

void WriteFileAtomically(const std::filesystem::path& path,
                         const std::function<void(std::ostream&)>& write) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
    write(out);
    out.flush();
    if (!out) {
      out.close();
      std::filesystem::remove(tmp);
      throw std::runtime_error("writing " + path.string() + " failed (disk full?)");
    }
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace headroom
