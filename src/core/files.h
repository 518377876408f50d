// Files written whole or not at all.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace torchneck {

// How the new file takes the place of an old one at `path`.
enum class Replace {
  // Renamed over it: a reader finds the old file or the new one, never
  // neither, and never a half-written one. On ext4 the rename over a file
  // also writes the new file's data back at once (auto_da_alloc): ~5 ms for
  // a 9 MB trace.json.
  kAtomically,
  // The old one removed first, then the new one renamed in: still never half
  // a file, but a reader may briefly find none. For files made again from
  // data kept elsewhere (the reports of a run or a trace).
  kRemoveOldFirst,
};

// Writes `data` to `path`: a temporary file in the same folder, then
// rename, so a reader (or a crash) never sees half a file. The temporary
// file has a fresh, unpredictable name and is created with O_EXCL|O_NOFOLLOW,
// and the rename replaces whatever `path` was (a symlink included) without
// following it: no name planted in a shared folder can redirect the write.
// Throws std::runtime_error with a one-line message ("cannot write PATH:
// why") and leaves no temporary file behind.
void write_file_atomically(const std::string& path, const std::string& data, Replace how = Replace::kAtomically);

// The same for a file produced in pieces: `produce` is called with a sink
// that writes each piece as it comes, so the whole file is never in memory.
// Nothing is renamed into place unless every piece was written.
void write_file_atomically(const std::string& path,
                           const std::function<void(const std::function<void(std::string_view)>&)>& produce,
                           Replace how = Replace::kAtomically);

// Creates a file of a fresh, unpredictable name "DIR/.PREFIX-XXXXXXXXXXXX"
// with O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC (mode 0666 less the umask, as
// fopen would). Returns the descriptor and sets *name, or returns -1 with
// errno set.
int create_fresh_file(const std::string& dir, const std::string& prefix, std::string* name);

// Throws std::runtime_error "PATH: not a regular file (a FIFO)" unless
// `mode` (stat's st_mode) is a regular file's.
void require_regular_file(const std::string& path, unsigned mode);

// PATH opened for reading, if it is a regular file: opened without blocking
// (a FIFO's open waits for a writer), then refused by fstat unless regular
// (require_regular_file), so a FIFO or a device that may never end is never
// read. Sets *size to the file's size. Throws std::runtime_error "PATH:
// cannot open (why)".
int open_regular_file(const std::string& path, uint64_t* size);

// What is left to read of `f` (a pipe too: in pieces), and whether it was
// read without error. Does not close f.
std::string read_rest(std::FILE* f, bool* ok);

}  // namespace torchneck
