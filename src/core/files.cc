#include "core/files.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace torchneck {

namespace {

// Random characters in a fresh name: 12 of 36 make a planted name a guess
// in 2^62, and a name taken (EEXIST) is simply drawn again.
constexpr int kRandomChars = 12;
constexpr int kCreateAttempts = 100;

std::string random_suffix() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[kRandomChars];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  std::string out(kRandomChars, '0');
  for (int i = 0; i < kRandomChars; ++i) out[i] = kAlphabet[bytes[i] % (sizeof kAlphabet - 1)];
  return out;
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Writes every byte, through EINTR and short writes; false with errno set.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Pieces are gathered to this size before each write(2): a report made of
// many small pieces costs few system calls.
constexpr size_t kWriteBuffer = size_t{1} << 16;

}  // namespace

int create_fresh_file(const std::string& dir, const std::string& prefix, std::string* name) {
  for (int attempt = 0; attempt < kCreateAttempts; ++attempt) {
    const std::string candidate = (dir == "/" ? "" : dir) + "/." + prefix + "-" + random_suffix();
    const int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      *name = candidate;
      return fd;
    }
    if (errno != EEXIST) return -1;
  }
  errno = EEXIST;
  return -1;
}

void write_file_atomically(const std::string& path, const std::string& data, Replace how) {
  write_file_atomically(path, [&data](const std::function<void(std::string_view)>& sink) { sink(data); }, how);
}

void write_file_atomically(const std::string& path,
                           const std::function<void(const std::function<void(std::string_view)>&)>& produce,
                           Replace how) {
  std::string tmp;
  const int fd = create_fresh_file(folder_of(path), name_of(path) + ".tmp", &tmp);
  if (fd < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  int err = 0;
  std::string pending;
  auto flush = [&] {
    if (err == 0 && !write_all(fd, pending)) err = errno;
    pending.clear();
  };
  try {
    produce([&](std::string_view piece) {
      if (err != 0) return;
      if (pending.size() + piece.size() > kWriteBuffer) flush();
      if (piece.size() >= kWriteBuffer) {
        if (!write_all(fd, piece)) err = errno;
      } else {
        pending.append(piece);
      }
    });
    flush();
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && how == Replace::kRemoveOldFirst && ::unlink(path.c_str()) != 0 && errno != ENOENT) err = errno;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
  }
}

void require_regular_file(const std::string& path, unsigned mode) {
  if (S_ISREG(mode)) return;
  const char* kind = S_ISDIR(mode)    ? "a folder"
                     : S_ISFIFO(mode) ? "a FIFO"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : "not a file";
  throw std::runtime_error(path + ": not a regular file (" + kind + ")");
}

int open_regular_file(const std::string& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(path + ": cannot open (" + std::strerror(err) + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    require_regular_file(path, st.st_mode);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // a network file system may heed it
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
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
