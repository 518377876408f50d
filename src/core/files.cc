#include "core/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace torchneck {

void write_file_atomically(const std::string& path, const std::string& data, Replace how) {
  write_file_atomically(path, [&data](const std::function<void(std::string_view)>& sink) { sink(data); }, how);
}

void write_file_atomically(const std::string& path,
                           const std::function<void(const std::function<void(std::string_view)>&)>& produce,
                           Replace how) {
  // The pid keeps two processes writing into one folder (workers) apart.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  bool ok = true;
  int err = 0;
  try {
    produce([&](std::string_view piece) {
      if (ok && std::fwrite(piece.data(), 1, piece.size(), f) != piece.size()) {
        ok = false;
        err = errno;
      }
    });
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (ok && std::fflush(f) != 0) {
    ok = false;
    err = errno;
  }
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && how == Replace::kRemoveOldFirst && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
    ok = false;
    err = errno;
  }
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
  }
}

std::string read_rest(std::FILE* f, bool* ok) {
  std::string out;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, got);
  *ok = std::ferror(f) == 0;
  return out;
}

}  // namespace torchneck
