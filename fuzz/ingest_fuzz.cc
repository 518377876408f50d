// libFuzzer target for the Kineto trace ingest (src/ingest/kineto_json.h):
// any bytes must give a Trace or a std::runtime_error, never a crash, a
// hang, a sanitizer report or another exception. A Trace that comes back
// must keep the model's promises (kineto_trace.h), checked below.
//
//   fuzz/run.sh                    # builds into build/fuzz/, runs 30 s
//   FUZZ_SECONDS=600 fuzz/run.sh   # longer; `make fuzz FUZZ_SECONDS=600`
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "ingest/kineto_json.h"

namespace {

void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "ingest_fuzz: broken promise: %s%s%s\n", what, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

void check(const torchneck::kineto::Trace& t) {
  using torchneck::kineto::Event;
  if (t.source != "fuzz.json") fail("path");
  const Event* prev = nullptr;
  for (const Event& e : t.events) {
    if (e.name >= t.names.size()) fail("name index out of range");
    if (e.dur_ns < 0) fail("negative duration");
    if (prev != nullptr && (prev->ts_ns > e.ts_ns || (prev->ts_ns == e.ts_ns && prev->dur_ns < e.dur_ns)))
      fail("events not sorted by ts, longer first");
    // Analyses compute ends; under -fsanitize=undefined an overflow here is a finding.
    volatile int64_t end = e.end_ns();
    (void)end;
    (void)t.name_of(e).size();
    prev = &e;
  }
}

// "fuzz.json: byte N: ..." or "fuzz.json: event N: ...", on one line.
void check_message(const std::string& m) {
  const std::string head = "fuzz.json: ";
  if (m.rfind(head, 0) != 0) fail("error message does not start with the path", m);
  size_t at = head.size();
  if (m.compare(at, 5, "byte ") == 0) at += 5;
  else if (m.compare(at, 6, "event ") == 0) at += 6;
  else fail("error message has neither \"byte N\" nor \"event N\"", m);
  const size_t digits = at;
  while (at < m.size() && m[at] >= '0' && m[at] <= '9') ++at;
  if (at == digits || m.compare(at, 2, ": ") != 0) fail("error message: no number after byte/event", m);
  if (m.find('\n') != std::string::npos) fail("error message spans lines", m);
}

// What a reading gave, to compare the one-thread and two-thread readings.
std::string outcome(const std::string& text) {
  try {
    const torchneck::kineto::Trace t = torchneck::kineto::parse_trace(text, "fuzz.json");
    check(t);
    std::string r = "ok " + std::to_string(t.events.size()) + " " + std::to_string(t.flows.size()) + " " +
                    std::to_string(t.names.size()) + " " + std::to_string(t.process_names.size()) + " " +
                    std::to_string(t.thread_names.size()) + " " + std::to_string(t.device_memory.size());
    for (const auto& e : t.events)
      r += " " + std::to_string(e.ts_ns) + "/" + std::to_string(e.dur_ns) + "/" + std::to_string(e.name) + "/" +
           std::to_string(e.pid) + "/" + std::to_string(e.tid) + "/" + std::to_string(e.stream);
    for (const auto& f : t.flows) r += " f" + std::to_string(f.id) + "/" + std::to_string(f.pid) + "/" + std::to_string(f.tid);
    for (const auto& n : t.names) r += " n" + n;
    for (const auto& [dev, m] : t.device_memory)
      r += " m" + std::to_string(dev) + "/" + std::to_string(m.peak_allocated) + "/" + std::to_string(m.running);
    return r;
  } catch (const std::runtime_error& e) {
    check_message(e.what());
    return e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace torchneck::kineto::detail;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string one = outcome(text);
  // The same input with the two-thread scan and parse forced on it: the
  // same trace or the same error, exactly.
  const size_t events = set_parallel_min_events(2), bytes = set_parallel_min_bytes(0);
  const std::string two = outcome(text);
  set_parallel_min_events(events);
  set_parallel_min_bytes(bytes);
  if (one != two) fail("two-thread reading differs from one-thread reading", one.substr(0, 300) + " | " + two.substr(0, 300));
  return 0;
}
