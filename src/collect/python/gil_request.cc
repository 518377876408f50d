// See gil_request.h. Moved out of sampler.cc, whose threads it serves.
#include "collect/python/gil_request.h"

#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace torchneck {
namespace {

// How long the sampler waits for a busy thread to hand over the GIL before
// CPython asks it to (the switch interval, during that wait only).
constexpr unsigned long kGilRequestUs = 100;

// --- The switch interval, lowered while the sampler waits for the GIL ------
//
// CPython keeps it in `interval`, the first field of its GIL (struct
// _gil_runtime_state, Include/internal/pycore_gil.h); a thread waiting in
// take_gil() reads it at every turn of its wait, then asks the holder to let
// go. Where that GIL is, and how to reach it:
//   3.11  _PyRuntime.ceval.gil; _PyEval_{Get,Set}SwitchInterval are exported
//         and need no thread state: used as they are.
//   3.12  interp->ceval.gil; the setter is exported but reads the calling
//         thread's state, which a thread waiting for the GIL does not have
//         (calling it there dereferences NULL).
//   3.13  interp->ceval.gil; the setter is no longer exported.
// The public sys.setswitchinterval needs the GIL, which is what we wait for,
// and lowering the interval for the whole time between samples would change
// how the program's own threads switch. So on 3.12+ the field is found once,
// at start, with the GIL held: among the first words of PyInterpreterState
// is its pointer to its GIL, whose head holds the interval that
// sys.getswitchinterval() reports, the thread state holding the GIL (ours)
// and locked == 1; and two writes through sys.setswitchinterval must show up
// there. Memory is read with process_vm_readv, which fails rather than
// faults, so a layout we do not know costs only the lowering (the report
// says so in a note), never a crash. The internal headers cannot be used
// instead: they do not compile as C++.
struct GilHead {            // the head of struct _gil_runtime_state, 3.11-3.13
  unsigned long interval;   // microseconds
  void* last_holder;        // PyThreadState*, atomic in CPython
  int locked;
};

// The value to put back while the interval is lowered, else 0; a forked
// child (a thread of the parent held the GIL to fork while we waited for it)
// puts it back through the atfork handler.
std::atomic<unsigned long> g_lowered_from{0};
#if PY_VERSION_HEX >= 0x030C0000
unsigned long* g_interval = nullptr;  // the GIL's interval field; set with the GIL held
PyInterpreterState* g_interval_interp = nullptr;
#endif

bool interval_known() {
#if PY_VERSION_HEX >= 0x030C0000
  return g_interval != nullptr;
#else
  return true;
#endif
}

unsigned long load_interval() {
#if PY_VERSION_HEX >= 0x030C0000
  return __atomic_load_n(g_interval, __ATOMIC_RELAXED);
#else
  return _PyEval_GetSwitchInterval();
#endif
}

// Sets the interval to `desired` if it is still `expected`: a value the
// program sets in between (sys.setswitchinterval) is kept.
bool replace_interval(unsigned long expected, unsigned long desired) {
#if PY_VERSION_HEX >= 0x030C0000
  return __atomic_compare_exchange_n(g_interval, &expected, desired, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED);
#else
  // 3.11's setter has no compare-and-swap; the window is a few instructions.
  if (_PyEval_GetSwitchInterval() != expected) return false;
  _PyEval_SetSwitchInterval(desired);
  return true;
#endif
}

// Without the GIL, just before waiting for it. Returns the value to restore,
// or 0 when nothing was lowered.
unsigned long lower_switch_interval() {
  if (!interval_known()) return 0;
  const unsigned long was = load_interval();
  if (was <= kGilRequestUs) return 0;
  g_lowered_from.store(was, std::memory_order_relaxed);
  if (!replace_interval(was, kGilRequestUs)) {
    g_lowered_from.store(0, std::memory_order_relaxed);
    return 0;
  }
  return was;
}

// As soon as we hold the GIL.
void restore_switch_interval(unsigned long was) {
  if (was == 0) return;
  replace_interval(kGilRequestUs, was);
  g_lowered_from.store(0, std::memory_order_relaxed);
}

void restore_switch_interval_in_fork_child() {
  const unsigned long was = g_lowered_from.exchange(0, std::memory_order_relaxed);
  if (was != 0 && interval_known()) replace_interval(kGilRequestUs, was);
}
// --- 3.13: asking the main thread for the GIL at once ------------------------
//
// A lowered interval still leaves kGilRequestUs, plus however long the OS
// takes to run the waiting sampler again, during which a release by the
// busy thread hands the GIL over at its releasing call. When every core is
// busy that wait is long, and part of the bias returns (docs/python-modes.md).
// 3.13 keeps
// the GIL drop request in each thread state's public `eval_breaker` word
// (Include/cpython/pystate.h; the bit is _PY_GIL_DROP_REQUEST_BIT,
// Include/internal/pycore_ceval.h), which take_gil() sets on the holder once
// the interval has passed. When the GIL holder is the main thread (the
// DataLoader's num_workers=0 preprocessing, a worker process's loop), the
// sampler sets it itself just before waiting: the main thread then stops at
// its next bytecode boundary and waits there (FORCE_SWITCHING) until the
// sampler holds the GIL, however late the OS runs the sampler. The bit is
// cleared again as soon as we hold the GIL, so it never outlives our wait
// (a main thread that saw it with no one waiting would block); a forked child
// clears its copy. The main thread's state lives in PyInterpreterState
// (_initial_thread) for the interpreter's life, so the write is always to
// live memory. Other threads get the lowered interval only.
#if PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000
#define TORCHNECK_DROP_REQUEST 1
constexpr uintptr_t kGilDropRequestBit = uintptr_t{1} << 0;  // _PY_GIL_DROP_REQUEST_BIT
PyThreadState* g_main_thread = nullptr;  // set at start (GIL held), when started on the main thread
std::atomic<bool> g_drop_requested{false};

// Without the GIL, just before waiting for it. True when the bit was set.
bool request_main_thread_drop() {
  if (g_main_thread == nullptr || g_interval == nullptr) return false;
  const auto* gil = reinterpret_cast<const GilHead*>(g_interval);
  if (__atomic_load_n(&gil->locked, __ATOMIC_RELAXED) != 1 ||
      __atomic_load_n(&gil->last_holder, __ATOMIC_RELAXED) != g_main_thread) {
    return false;
  }
  g_drop_requested.store(true, std::memory_order_relaxed);
  __atomic_fetch_or(&g_main_thread->eval_breaker, kGilDropRequestBit, __ATOMIC_SEQ_CST);
  return true;
}

// As soon as we hold the GIL.
void clear_main_thread_drop(bool requested) {
  if (!requested) return;
  __atomic_fetch_and(&g_main_thread->eval_breaker, ~kGilDropRequestBit, __ATOMIC_SEQ_CST);
  g_drop_requested.store(false, std::memory_order_relaxed);
}
#endif

void after_fork_in_child() {
  restore_switch_interval_in_fork_child();
#ifdef TORCHNECK_DROP_REQUEST
  if (g_drop_requested.exchange(false, std::memory_order_relaxed)) {
    __atomic_fetch_and(&g_main_thread->eval_breaker, ~kGilDropRequestBit, __ATOMIC_SEQ_CST);
  }
#endif
}

#if PY_VERSION_HEX >= 0x030C0000
// Reads n bytes of this process at `at`; false (never a fault) if unmapped.
bool read_own(const void* at, void* out, size_t n) {
  iovec local{out, n};
  iovec remote{const_cast<void*>(at), n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

// sys.getswitchinterval() in microseconds (what CPython stores), or 0.
unsigned long sys_switch_interval_us(PyObject* sys) {
  PyObject* r = PyObject_CallMethod(sys, "getswitchinterval", nullptr);
  const double s = r ? PyFloat_AsDouble(r) : -1.0;
  Py_XDECREF(r);
  PyErr_Clear();
  return s > 0 ? static_cast<unsigned long>(std::llround(s * 1e6)) : 0;
}

// sys.setswitchinterval to exactly `us` microseconds (CPython truncates
// 1e6 * seconds: half a microsecond more rounds it right).
bool set_sys_switch_interval_us(PyObject* sys, unsigned long us) {
  PyObject* r = PyObject_CallMethod(sys, "setswitchinterval", "d", (static_cast<double>(us) + 0.5) * 1e-6);
  Py_XDECREF(r);
  PyErr_Clear();
  return r != nullptr;
}

// GIL held by the calling thread, `self`. Finds the GIL's interval field of
// `interp` (see above), or returns nullptr.
unsigned long* find_interval_field(PyInterpreterState* interp, PyThreadState* self) {
  constexpr size_t kScanWords = 512;  // the first 4 KiB of PyInterpreterState
  PyObject* sys = PyImport_ImportModule("sys");
  if (sys == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  const unsigned long now_us = sys_switch_interval_us(sys);
  std::vector<uintptr_t> words(kScanWords);
  uintptr_t found = 0;
  bool ambiguous = false;
  if (now_us > 0 && read_own(interp, words.data(), words.size() * sizeof(uintptr_t))) {
    for (uintptr_t w : words) {
      if (w < 4096 || w % alignof(GilHead) != 0 || w == found) continue;
      GilHead h;
      if (!read_own(reinterpret_cast<const void*>(w), &h, sizeof h)) continue;
      if (h.interval != now_us || h.last_holder != self || h.locked != 1) continue;
      if (found != 0) ambiguous = true;
      found = w;
    }
  }
  unsigned long* field = ambiguous ? nullptr : reinterpret_cast<unsigned long*>(found);
  if (field != nullptr) {
    // The field must follow the public setter, for two values.
    for (unsigned long probe : {now_us + 1234, now_us + 567}) {
      unsigned long seen = 0;
      if (!set_sys_switch_interval_us(sys, probe) || sys_switch_interval_us(sys) != probe ||
          !read_own(field, &seen, sizeof seen) || seen != probe) {
        field = nullptr;
        break;
      }
    }
    set_sys_switch_interval_us(sys, now_us);
  }
  Py_DECREF(sys);
  return field;
}
#endif

#ifdef TORCHNECK_DROP_REQUEST
// GIL held. Whether the calling thread is threading.main_thread().
bool on_main_thread() {
  PyObject* threading = PyImport_ImportModule("threading");
  PyObject* main = threading ? PyObject_CallMethod(threading, "main_thread", nullptr) : nullptr;
  PyObject* ident = main ? PyObject_GetAttrString(main, "ident") : nullptr;
  const bool yes = ident && PyLong_Check(ident) &&
                   PyLong_AsUnsignedLong(ident) == PyThread_get_thread_ident();
  Py_XDECREF(ident);
  Py_XDECREF(main);
  Py_XDECREF(threading);
  PyErr_Clear();
  return yes;
}
#endif

// GIL held. Whether the interval can be lowered while waiting for the GIL.
bool prepare_switch_interval_impl(PyInterpreterState* interp) {
  static bool atfork_registered = false;
  if (!atfork_registered) {
    atfork_registered = pthread_atfork(nullptr, nullptr, after_fork_in_child) == 0;
  }
#if PY_VERSION_HEX >= 0x030C0000
  if (g_interval_interp != interp) {  // once per interpreter (and still right after fork)
    g_interval = find_interval_field(interp, PyThreadState_Get());
    g_interval_interp = interp;
  }
#ifdef TORCHNECK_DROP_REQUEST
  g_main_thread = on_main_thread() ? PyThreadState_Get() : nullptr;
#endif
#else
  (void)interp;
#endif
  return interval_known();
}

}  // namespace

bool prepare_gil_request(PyInterpreterState* interp) { return prepare_switch_interval_impl(interp); }

GilRequest begin_gil_request() {
  GilRequest r;
  r.lowered_from = lower_switch_interval();
#ifdef TORCHNECK_DROP_REQUEST
  r.drop_requested = request_main_thread_drop();
#endif
  return r;
}

void end_gil_request(const GilRequest& r) {
#ifdef TORCHNECK_DROP_REQUEST
  clear_main_thread_drop(r.drop_requested);
#endif
  restore_switch_interval(r.lowered_from);
}

}  // namespace torchneck
