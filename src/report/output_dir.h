// The output folder of every command (`run`, `analyze`, `report`'s
// target): its default name, its creation before any work, and its removal
// when the command fails before writing into it. One implementation, used by
// torchneck-analyze directly and by the Python launcher through the
// extension (src/bindings/output_dir_binding.cc), so the two cannot drift.
#pragma once

#include <string>
#include <vector>

namespace torchneck {

// A folder made (or found) ready to write into.
struct PreparedDir {
  std::string shown;     // the path as the user gave it (or the default, relative)
  std::string absolute;  // lexically normal, no trailing '/': a script that changes directory still finds it
  std::vector<std::string> created;  // absolute paths of the folders made, outermost first
};

// The name a profiled target gives its output folder: the last component
// of TARGET (a script, a module name, a trace file or a folder of traces)
// without the suffixes that only say what kind of file it is (".gz",
// ".json", ".trace", ".pt", ".py", stripped from the end in that order), or
// "run" when nothing is left (TARGET "/" or ".").
std::string output_stem(const std::string& target);

// "torchneck-out/<stem>-<YYYYmmdd-HHMMSS>" (local time), relative to the
// working directory, with "-2", "-3", ... appended when that is taken: two
// runs started in the same second get two folders.
std::string default_output_dir(const std::string& target);

// How a command holds its output folder while it writes into it.
enum class FolderLock {
  kExclusive,  // one command's own folder: no other may write into it meanwhile
  kShared,     // a distributed job's folder, shared by the launchers of its nodes
};

// Creates REQUESTED (or, if empty, default_output_dir(TARGET)) and the
// folders above it, writes and removes a probe file in it, and locks it for
// this process (flock on the folder, held until the process ends), before
// the command does any work: an unwritable folder, or one another process
// is writing into, is then an invocation error rather than a report lost
// after a long run. Throws std::runtime_error "cannot write the report to
// DIR: why" (DIR as given), having removed the folders it made.
PreparedDir prepare_output_dir(const std::string& requested, const std::string& target,
                               FolderLock lock = FolderLock::kExclusive);

// Removes CREATED's folders, innermost first, while they are empty: for a
// command that fails after prepare_output_dir but before (or while) writing,
// so that it leaves nothing behind; a folder that holds files (a report
// partly written) and the ones above it are kept. Never throws.
void remove_created(const std::vector<std::string>& created);

}  // namespace torchneck
