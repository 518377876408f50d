#include "ingest/kineto_json.h"

#include "core/files.h"
#include "core/timing.h"
#include "ingest/exact_times.h"
#include "ingest/kineto_parser.h"
#include "ingest/trace_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <charconv>
#include <cstdlib>
#include <deque>
#include <optional>
#include <thread>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "simdjson.h"

#include <sys/stat.h>

namespace torchneck::kineto {

namespace {

using namespace parser;  // NOLINT: the parser is this file's own internals
namespace dom = simdjson::dom;
namespace od = simdjson::ondemand;

// Where a document that simdjson rejected goes wrong: walks it with the
// on-demand parser, which stops at the first bad token and says where (an
// offset from `data`; `size` when the walk finds nothing wrong, and then
// *bad, when given, is false). `capacity` bytes are readable from `data`.
size_t error_offset(const char* data, size_t size, size_t capacity, bool* bad = nullptr) {
  if (bad != nullptr) *bad = true;
  od::parser parser;
  od::document doc;
  if (parser.iterate(simdjson::padded_string_view(data, size, capacity)).get(doc) != simdjson::SUCCESS) return 0;
  const char* at = nullptr;
  // Depth-bounded (simdjson's own limit): hostile nesting must not overflow
  // our stack.
  size_t depth = 0;
  std::function<simdjson::error_code(od::value)> walk = [&](od::value v) -> simdjson::error_code {
    if (depth > simdjson::DEFAULT_MAX_DEPTH) return simdjson::DEPTH_ERROR;
    struct Deeper {
      size_t& d;
      explicit Deeper(size_t& x) : d(x) { ++d; }
      ~Deeper() { --d; }
    } deeper(depth);
    od::json_type t;
    if (auto err = v.type().get(t)) return err;
    if (t == od::json_type::object) {
      od::object o;
      if (auto err = v.get_object().get(o)) return err;
      for (auto f : o) {
        od::value x;
        if (auto err = f.value().get(x)) return err;
        if (auto err = walk(x)) return err;
      }
      return simdjson::SUCCESS;
    }
    if (t == od::json_type::array) {
      od::array a;
      if (auto err = v.get_array().get(a)) return err;
      for (auto item : a) {
        od::value x;
        if (auto err = item.get(x)) return err;
        if (auto err = walk(x)) return err;
      }
      return simdjson::SUCCESS;
    }
    if (t == od::json_type::number) return v.get_double().error();
    if (t == od::json_type::string) return v.get_string().error();
    if (t == od::json_type::boolean) return v.get_bool().error();
    return v.is_null().error();
  };
  od::value root;
  simdjson::error_code err = doc.get_value().get(root);
  if (!err) err = walk(root);
  // Past a whole value, a location is what follows it: trailing content.
  if (doc.current_location().get(at) == simdjson::SUCCESS && at != nullptr) return static_cast<size_t>(at - data);
  if (!err && bad != nullptr) *bad = false;
  return size;
}

size_t error_offset(const BigBytes& json) {
  return error_offset(json.data(), json.size(), json.size() + json.padding());
}

// The same for a text whose start was given back (BigBytes::release) after
// it was read without fault: the elements of the events array from the
// first one wholly after `kept_from` are walked one by one (each is a whole
// document: the scanner found where they start and end).
size_t error_offset_after(const BigBytes& json, const EventsLayout& layout, size_t kept_from) {
  const size_t capacity = json.size() + json.padding();
  for (size_t i = 0; i < layout.elements; ++i) {
    const size_t start = i == 0 ? layout.begin + 1 : layout.commas[i - 1] + 1;
    if (start < kept_from) continue;
    const size_t end = i + 1 < layout.elements ? layout.commas[i] : layout.end;
    bool bad = false;
    const size_t at = error_offset(json.data() + start, end - start, capacity - start, &bad);
    if (bad) return start + at;
  }
  return layout.end;
}

}  // namespace

namespace {

void ingest_phase(const char* what) { timing_phase(what, 2); }

// By start, longer first, ties in file order (a stable sort): the keys are
// sorted, then each event moved once (an Event is ~190 bytes: merge-sorting
// them moved each log n times).
void sort_events(std::vector<Event>& events) {
  struct Key {
    int64_t ts, dur;
    uint32_t index;
  };
  std::vector<Key> keys(events.size());
  bool sorted = true;
  for (size_t i = 0; i < events.size(); ++i) {
    keys[i] = {events[i].ts_ns, events[i].dur_ns, static_cast<uint32_t>(i)};
    if (i > 0 && (keys[i].ts < keys[i - 1].ts || (keys[i].ts == keys[i - 1].ts && keys[i].dur > keys[i - 1].dur)))
      sorted = false;
  }
  if (sorted) return;
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.dur != b.dur) return a.dur > b.dur;
    return a.index < b.index;
  });
  // In place, cycle by cycle (no second copy of the events: peak memory).
  constexpr uint32_t kDone = UINT32_MAX;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].index == kDone || keys[i].index == i) continue;
    Event held = std::move(events[i]);
    size_t j = i;
    while (keys[j].index != i) {
      const size_t from = keys[j].index;
      events[j] = std::move(events[from]);
      keys[j].index = kDone;
      j = from;
    }
    events[j] = std::move(held);
    keys[j].index = kDone;
  }
}

// Two threads are opt-in (detail::set_parallel_min_events / _min_bytes;
// `torchneck analyze` with TORCHNECK_INGEST_THREADS=2 sets 8192 events and
// 1 MiB): with other work on both cores, the second thread's own arena
// and stacks cost more page faults than its parallelism wins back
// (docs/analyze.md).
size_t parallel_min_events = SIZE_MAX;
size_t parallel_min_bytes = SIZE_MAX;

// The events of [b, b + len) as a stream of small documents into p; false
// on any error (the caller then redoes the whole array in one pass, which
// reports it). `progress` only from the main thread.
bool stream_events(Parser& p, const char* b, size_t len, size_t batch, size_t count,
                   const std::function<void(size_t, size_t)>* progress, size_t offset, size_t total) noexcept {
  try {
    dom::parser parser;
    simdjson::dom::document_stream docs;
    if (parser.parse_many(reinterpret_cast<const uint8_t*>(b), len, batch).get(docs)) return false;
    size_t n = 0;
    for (auto doc : docs) {
      dom::element el;
      if (doc.get(el)) return false;
      p.event_element(el);
      if (progress != nullptr && *progress && (++n & 0x3FFF) == 0)
        (*progress)(offset + docs.size_in_bytes() * n / std::max<size_t>(1, count), total);
    }
    return true;
  } catch (...) {
    return false;
  }
}

// The two halves of the events array, split at the comma in the middle, on
// two threads; the second half's reading merged into p as if p had read it.
bool events_in_two(Parser& p, const char* buf, const EventsLayout& layout, size_t batch,
                   const std::vector<ExactTime>& exact, size_t total) {
  const size_t mid = layout.elements / 2;
  if (layout.commas.size() != layout.elements - 1) return false;
  const size_t first = layout.begin + 1, cut = layout.commas[mid - 1];
  Trace later_trace;
  const std::function<void(size_t, size_t)> none;
  Parser later(later_trace, none, total, exact, mid, /*later=*/true);
  // One array for both, sized by the scanner's count of elements whose "ph"
  // may be "X" in each half (only those give an event; a parser that would
  // write past its range fails, and the one pass takes over).
  size_t first_half = 0, second_half = 0;
  for (size_t i = 0; i < exact.size() && i < layout.elements; ++i) (i < mid ? first_half : second_half) += exact[i].maybe_complete;
  std::vector<Event>& events = p.events();
  events.resize(first_half + second_half);
  p.write_to(events.data(), first_half);
  later.write_to(events.data() + first_half, second_half);
  bool later_ok = false;
  std::thread worker;
  try {
    worker = std::thread([&] {
      later_ok = stream_events(later, buf + cut + 1, layout.end - cut - 1, batch, layout.elements - mid, nullptr, 0, total);
    });
  } catch (...) {
    return false;  // no thread: one pass
  }
  const bool ok = stream_events(p, buf + first, cut - first, batch, mid, &p.progress(), first, total);
  worker.join();
  if (!ok || !later_ok || p.parsed() != mid || later.parsed() != layout.elements || later.ambiguous()) return false;
  p.merge(later);
  return true;
}

// The text did not arrive whole (ArrivingText::finish): read it again.
struct NotWhole {};

std::runtime_error invalid_json(const std::string& path, const BigBytes& json, simdjson::error_code err) {
  return std::runtime_error(path + ": byte " + std::to_string(error_offset(json)) + ": not valid JSON (" +
                            simdjson::error_message(err) + ")");
}

// No events array to stream (or one the scanner cannot split): the whole
// document in one DOM, which also finds what is wrong with it.
void parse_whole_document(BigBytes& json, const std::string& path, Parser& p) {
  dom::parser parser;
  dom::element root;
  if (const auto err = parser.parse(json.data(), json.size(), false).get(root)) throw invalid_json(path, json, err);
  try {
    p.document(root);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": event " + std::to_string(p.parsed()) + ": " + e.what());
  }
}

// The events array in one pass, as a stream of one small document per event
// (the commas between them blanked by the caller), in batches of BATCH
// bytes. The text already read is given back as the events are read (in
// whole huge pages, a generous two batches behind the element being read:
// simdjson reads on, never back), so that the peak memory is not the whole
// text plus the events read from it; an error past that point is then found
// by walking the elements from the first one still whole.
void stream_events_one_pass(BigBytes& json, const std::string& path, const EventsLayout& layout, size_t batch,
                            const std::vector<ExactTime>& exact, Parser& p, Trace& t,
                            const std::function<void(size_t, size_t)>& progress) {
  char* buf = json.data();
  const size_t first = layout.begin + 1, len = layout.end - first;
  dom::parser stream_parser;
#ifdef SIMDJSON_THREADS_ENABLED
  // No stage-1 thread of its own: as fast end to end, less CPU, and its
  // buffers are not there twice (docs/analyze.md).
  stream_parser.threaded = false;
#endif
  simdjson::dom::document_stream docs;
  size_t released = 0;
  auto restore = [&] {
    for (size_t c : layout.commas)
      if (c >= released) buf[c] = ',';
  };
  auto invalid_here = [&](simdjson::error_code err) {
    if (released == 0) return invalid_json(path, json, err);
    return std::runtime_error(path + ": byte " + std::to_string(error_offset_after(json, layout, released)) +
                              ": not valid JSON (" + simdjson::error_message(err) + ")");
  };
  if (const auto err = stream_parser.parse_many(buf + first, len, batch).get(docs)) {
    restore();
    throw invalid_json(path, json, err);
  }
  // Sized once: grown by doubling, the copies fault in fresh pages. The
  // events: the elements whose "ph" may be "X"; the flows (a third of the
  // elements in a trace with fwdbwd/ac2g flows): the others.
  size_t complete = 0;
  for (size_t i = 0; i < exact.size() && i < layout.elements; ++i) complete += exact[i].maybe_complete;
  t.events.reserve(complete);
  t.flows.reserve(layout.elements - std::min(complete, layout.elements));
  size_t n = 0, read = 0;
  try {
    for (auto doc : docs) {
      dom::element el;
      if (const auto err = doc.get(el)) {
        restore();
        throw invalid_here(err);
      }
      p.event_element(el);
      if (progress && (++n & 0x3FFF) == 0)
        progress(first + docs.size_in_bytes() * n / std::max<size_t>(1, layout.elements), json.size());
      if ((++read & 0x3FF) == 0 && read < layout.elements) {
        const size_t behind = layout.commas[read - 1] > 2 * batch ? layout.commas[read - 1] - 2 * batch : 0;
        if (behind > std::max(released, first) + (size_t{2} << 20))
          if (const size_t upto = json.release(std::max(released, first), behind)) released = upto;
      }
    }
  } catch (const Fail& e) {
    throw std::runtime_error(path + ": event " + std::to_string(p.parsed()) + ": " + e.what());
  }
  if (p.parsed() != layout.elements) {
    restore();
    throw invalid_here(simdjson::TAPE_ERROR);
  }
}

// The text around the events array, with "[]" for it: the same JSON as the
// whole text with the array blanked, without scanning megabytes of blanks.
// Only when it is invalid, the whole text, blanked, to say where.
void parse_around_events(BigBytes& json, const std::string& path, const EventsLayout& layout, Parser& p) {
  char* buf = json.data();
  const size_t first = layout.begin + 1, len = layout.end - first;
  dom::parser top_parser;
  dom::element root;
  std::string around;
  around.reserve(first + (json.size() - layout.end));
  around.append(buf, first).append(buf + layout.end, json.size() - layout.end);
  const simdjson::padded_string around_text(around);
  if (top_parser.parse(around_text).get(root)) {
    std::memset(buf + first, ' ', len);
    if (const auto err = top_parser.parse(json.data(), json.size(), false).get(root))
      throw invalid_json(path, json, err);
  }
  try {
    p.top_level(root);
  } catch (const std::exception& e) {
    // The metadata around the events (deviceProperties, distributedInfo):
    // the position we know is where the events end.
    throw std::runtime_error(path + ": byte " + std::to_string(layout.end + 1) +
                             ": in the metadata after \"traceEvents\": " + e.what());
  }
}

// The events array is most of the file. Parsed as a stream of one small
// document per event (the commas between them blanked), the parser's
// buffers are sized by a batch, not by the file: memory stays near the
// text's own size. Then the top level, with the array blanked, for the
// metadata around it.
void parse_events_array(BigBytes& json, const std::string& path, const EventsLayout& layout,
                        const std::vector<ExactTime>& exact, std::optional<Parser>& p, Trace& t,
                        const std::function<void(size_t, size_t)>& progress) {
  char* buf = json.data();
  for (size_t c : layout.commas) buf[c] = ' ';
  const size_t len = layout.end - (layout.begin + 1);
  // Batches of 128 KB (small inputs: their own size), at least the largest
  // event: the parser's buffers (two parsers: simdjson's stage-1 thread has
  // its own) are sized by the batch; larger ones only raise the peak memory.
  const size_t batch = std::max<size_t>(std::min<size_t>(size_t{1} << 17, len + 64), layout.largest + 64);
  // A large array: its two halves on two threads, when that reads exactly
  // what one pass would; anything unusual (an error, ids it cannot place)
  // and the one pass below does it all again, errors included.
  bool in_two = false;
  if (layout.elements >= parallel_min_events && layout.elements >= 2) {
    p.emplace(t, progress, json.size(), exact);
    // Smaller batches: two parsers (each with its stage-1 thread's) at once.
    const size_t half_batch = std::max<size_t>(std::min<size_t>(size_t{1} << 18, len + 64), layout.largest + 64);
    in_two = events_in_two(*p, buf, layout, half_batch, exact, json.size());
    if (!in_two) {
      p.reset();
      const std::string source = t.source;
      t = Trace();
      t.source = source;
    }
  }
  if (!in_two) {
    p.emplace(t, progress, json.size(), exact);
    stream_events_one_pass(json, path, layout, batch, exact, *p, t, progress);
  }
  ingest_phase(in_two ? "events (2 threads)" : "events");
  parse_around_events(json, path, layout, *p);
}

// `arriving`: the text is still being written into json (scanned as it
// arrives); throws NotWhole if it does not arrive whole.
Trace parse_padded(BigBytes& json, const std::string& path, const std::function<void(size_t, size_t)>& progress,
                   detail::TextArrival* arriving = nullptr) {
  Trace t;
  t.source = path;
  detail::ScannedTimes scanned = detail::scan_times(json.data(), json.size(), parallel_min_bytes, arriving);
  if (arriving != nullptr && !arriving->finish()) throw NotWhole{};
  const std::vector<ExactTime>& exact = scanned.times;
  const EventsLayout& layout = scanned.layout;
  ingest_phase(scanned.in_two ? "scan (2 threads)" : arriving != nullptr ? "read + gunzip | scan" : "scan");
  const std::string_view text(json.data(), json.size());
  const size_t opening = text.find_first_not_of(" \t\r\n");
  if (opening == std::string_view::npos) throw std::runtime_error(path + ": byte 0: the file is empty");
  if (text[opening] != '{' && text[opening] != '[')  // as read_trace_file says it, for a text given in memory
    throw std::runtime_error(detail::not_a_json_trace(path, opening, text[opening]));
  std::optional<Parser> p;
  if (!layout.found || !layout.well_separated || layout.elements == 0) {
    p.emplace(t, progress, text.size(), exact);
    parse_whole_document(json, path, *p);
  } else {
    parse_events_array(json, path, layout, exact, p, t, progress);
  }
  ingest_phase("top level");
  sort_events(t.events);
  ingest_phase("sort");
  return t;
}

}  // namespace

namespace detail {
size_t set_parallel_min_events(size_t n) {
  const size_t old = parallel_min_events;
  parallel_min_events = n;
  return old;
}
size_t set_parallel_min_bytes(size_t n) {
  const size_t old = parallel_min_bytes;
  parallel_min_bytes = n;
  return old;
}
}  // namespace detail

Trace parse_trace(const std::string& text, const std::string& path,
                  const std::function<void(size_t, size_t)>& progress) {
  BigBytes json(text.data(), text.size(), simdjson::SIMDJSON_PADDING);
  return parse_padded(json, path, progress);
}

Trace load_trace(const std::string& path, const std::function<void(size_t, size_t)>& progress,
                 const ReadLimits& limits) {
  ingest_phase("start");
  // Read and gunzipped on a second thread while this one scans what has
  // arrived; anything unusual about the file and it is read again below,
  // at once, which says what is wrong with it.
  if (std::unique_ptr<detail::ArrivingText> arriving = detail::ArrivingText::open(path, limits)) {
    try {
      BigBytes& text = arriving->text();
      if (progress) progress(0, text.size());
      // The opt-in two-thread scan needs the whole text: it is waited for.
      const bool whole_first = parallel_min_bytes != SIZE_MAX;
      if (whole_first && !arriving->finish()) throw NotWhole{};
      Trace t = parse_padded(text, path, progress, whole_first ? nullptr : arriving.get());
      if (progress) progress(text.size(), text.size());
      return t;
    } catch (const NotWhole&) {
      if (!arriving->refusal().empty()) throw std::runtime_error(arriving->refusal());
      ingest_phase("(not whole: read again)");
    }
  }
  BigBytes json = detail::read_trace_file(path, limits);
  ingest_phase("read + gunzip");
  if (progress) progress(0, json.size());
  Trace t = parse_padded(json, path, progress);
  if (progress) progress(json.size(), json.size());
  return t;
}

std::vector<std::string> trace_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::runtime_error(path + ": no such file or folder");
  if (!fs::is_directory(path, ec)) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) require_regular_file(path, st.st_mode);
    return {path};
  }
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
    if (e.is_regular_file() && (ends(".json") || ends(".json.gz"))) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  // tensorboard_trace_handler writes NAME.pt.trace.json(.gz) per rank: when
  // the folder has such files, other JSON files beside them are not traces.
  std::vector<std::string> traces;
  for (const auto& f : files)
    if (f.find(".trace.json") != std::string::npos) traces.push_back(f);
  if (!traces.empty()) files = traces;
  if (files.empty()) throw std::runtime_error(path + ": no *.json or *.json.gz trace in this folder");
  return files;
}

}  // namespace torchneck::kineto
