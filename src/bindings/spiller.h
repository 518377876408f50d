// Never lose a profile (issue 6). While the script runs, a native thread
// writes the whole Run collected so far to DIR/profile.spill: after 1 s, then
// at doubling intervals up to `max_interval_s`, and never more often than
// keeps its own cost under `max_overhead` of the run. A kill -9 leaves the
// last spill, which `torchneck report DIR` turns into the full report.
//
// A fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) in the profiled
// process wakes the same thread from the handler (one write to a pipe, which
// is async-signal-safe); the thread takes a last snapshot of the operator
// data without the GIL (the crashing thread may hold it; the Python part is
// the last periodic one), writes the spill, profile.json and report.txt,
// prints the report, and the handler then lets the signal take its course
// (the previous handler, e.g. faulthandler, or the default action), so the
// exit status stays the script's. The handler waits for the report at most
// `crash_wait_s`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/run.h"
#include "pipeline/options.h"

namespace torchneck {

struct SpillOptions {
  std::string dir;          // output folder; the spill is dir + "/profile.spill"
  std::string cwd;          // for relative paths in the crash report
  ReportSettings settings;  // of the crash report
  double first_s = 1.0;     // first spill after this long
  double max_interval_s = 10.0;  // 0: no periodic spills (the crash report stays)
  double max_overhead = 0.02;
  double crash_wait_s = 20.0;
  bool crash_handler = true;
};

// What the spill thread calls. python() runs with the GIL held (the
// collectors' Python-side data); native() and info() without it. info()
// fills run.run, run.env and run.notes; native() adds a note for a
// collector that could not be snapshot within wait_ns.
struct SpillSources {
  std::function<void(Run&)> python;
  std::function<void(Run&, int64_t wait_ns)> native;
  std::function<void(Run&)> info;
};

// Caller holds the GIL. One spiller per process at a time.
void start_spiller(const SpillOptions& options, SpillSources sources);
// Caller holds the GIL (released while the thread is joined). No spill is
// written after it returns.
void stop_spiller();

// Asks the running spiller for a periodic spill now, its schedule going on
// from it (nothing without periodic spills): the process just learned it
// is a rank (python/torchneck/runner.py), and a rank killed before the next
// scheduled spill would otherwise leave only spills that do not say so.
void spill_soon();

// In a forked child: the spill thread was the parent's and the handlers
// report for the parent; remove the handlers and forget the thread.
void forget_spiller();

// Builds the parts every Run snapshot shares: threads (with names), the main
// thread's index, and the interned strings.
void fill_threads_and_strings(Run& run, uint64_t main_os_tid);

}  // namespace torchneck
