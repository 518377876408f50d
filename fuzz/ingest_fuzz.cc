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
  if (t.path != "fuzz.json") fail("path");
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check(torchneck::kineto::parse_trace(text, "fuzz.json"));
  } catch (const std::runtime_error& e) {
    check_message(e.what());
  }
  return 0;
}
