#include "report/output_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include "core/files.h"

namespace torchneck {

namespace fs = std::filesystem;

namespace {

// Suffixes that say what kind of file a target is, not which run it is;
// stripped from the end in this order ("x.pt.trace.json.gz" -> "x").
constexpr const char* kKindSuffixes[] = {".gz", ".json", ".trace", ".pt", ".py"};

// The stem when the target's name says nothing ("/", ".").
constexpr const char* kFallbackStem = "run";

// The folder, under the working directory, that default output folders go in.
constexpr const char* kDefaultParent = "torchneck-out";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "a/b/" -> "a/b"; "/" stays "/".
std::string without_trailing_slash(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string normal_absolute(const std::string& path) {
  return without_trailing_slash(fs::absolute(fs::path(path)).lexically_normal().string());
}

// Writes and removes a probe file of a fresh name (core/files.h): a folder
// can exist and still refuse files (read-only mount, permissions, quota).
// Returns errno, 0 if fine.
int probe_write(const std::string& dir) {
  std::string probe;
  const int fd = create_fresh_file(dir, "torchneck-write-test", &probe);
  if (fd < 0) return errno;
  int err = 0;
  if (::write(fd, "ok", 2) != 2) err = errno != 0 ? errno : EIO;
  if (::close(fd) != 0 && err == 0) err = errno;
  ::unlink(probe.c_str());
  return err;
}

// The output folders this process holds locked, by absolute path: a
// process that prepares the same folder twice (a report written again) is
// not refused by its own lock.
std::mutex held_mutex;
std::map<std::string, int>& held_locks() {
  static auto* held = new std::map<std::string, int>();  // never destroyed: the locks last until exit
  return *held;
}

// Takes a flock(2) on the folder itself, held until the process
// ends (its forked children share it; exec'd ones do not inherit the
// descriptor). Returns 0, EWOULDBLOCK when another process holds it, or
// errno. A file system without flock on folders leaves the folder unlocked.
int lock_folder(const std::string& dir, FolderLock lock) {
  std::lock_guard<std::mutex> hold(held_mutex);
  if (held_locks().count(dir) != 0) return 0;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  if (::flock(fd, (lock == FolderLock::kShared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return err;
    return 0;  // ENOLCK, EBADF (NFS emulates flock with byte-range locks, which need a file open for writing)
  }
  held_locks()[dir] = fd;
  return 0;
}

}  // namespace

std::string output_stem(const std::string& target) {
  std::string stem = fs::path(without_trailing_slash(target)).lexically_normal().filename().string();
  if (stem == "." || stem == "..") stem.clear();
  for (const char* suffix : kKindSuffixes)
    if (ends_with(stem, suffix)) stem.resize(stem.size() - std::strlen(suffix));
  return stem.empty() ? kFallbackStem : stem;
}

std::string default_output_dir(const std::string& target) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  const std::string base = std::string(kDefaultParent) + "/" + output_stem(target) + "-" + stamp;
  std::string dir = base;
  std::error_code ec;
  for (int n = 2; fs::exists(dir, ec) || fs::is_symlink(dir, ec); ++n) dir = base + "-" + std::to_string(n);
  return dir;
}

PreparedDir prepare_output_dir(const std::string& requested, const std::string& target, FolderLock lock) {
  PreparedDir out;
  out.shown = requested.empty() ? default_output_dir(target) : requested;
  auto fail = [&out](const std::string& why) {
    remove_created(out.created);
    throw std::runtime_error("cannot write the report to " + out.shown + ": " + why);
  };
  try {
    out.absolute = normal_absolute(out.shown);
  } catch (const fs::filesystem_error& e) {  // no working directory any more
    fail(e.code().message());
  }
  // Component by component, so that the folders made are known (and only
  // those are removed on failure, never one that was there before).
  fs::path p;
  for (const auto& part : fs::path(out.absolute)) {
    p /= part;
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (fs::is_directory(st)) continue;
    if (fs::exists(st)) fail(p.string() + " is not a folder");
    if (!fs::create_directory(p, ec)) {
      std::error_code again;
      if (fs::is_directory(p, again)) continue;  // made meanwhile by someone else: theirs, not ours
      fail(ec ? ec.message() : std::string(std::strerror(EEXIST)));
    }
    out.created.push_back(p.string());
  }
  if (const int err = probe_write(out.absolute); err != 0) fail(std::strerror(err));
  if (const int err = lock_folder(out.absolute, lock); err == EWOULDBLOCK)
    fail("another torchneck command is writing into it; give another folder with -o, or none for a new one");
  else if (err != 0)
    fail(std::strerror(err));
  return out;
}

void remove_created(const std::vector<std::string>& created) {
  for (auto it = created.rbegin(); it != created.rend(); ++it) {
    std::error_code ec;
    if (!fs::is_directory(*it, ec)) continue;  // never made, or gone
    if (::rmdir(it->c_str()) != 0) return;       // holds files: keep it and what is above it
  }
}

}  // namespace torchneck
