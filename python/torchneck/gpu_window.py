"""The GPU window of `torchneck run` (--gpu, --gpu-steps): torch's own
profiler (Kineto, CPU and CUDA activities) over a few steady optimizer
steps, chosen while the script runs, with no change to the script. The
trace goes to DIR/gpu/kineto.trace.json; at the end the native side reads
it with the same ingest and GPU analyses as `torchneck analyze`
(src/pipeline/gpu_window.cc), on the run's clock.

Which steps: the window opens at the end of an optimizer step once the
last WINDOW_SETTLED_STEPS steps took within WINDOW_SETTLED_SPREAD of their
median (warm-up over: allocator, cuDNN autotuning, lazy initialisation), or
after WINDOW_LATEST_START steps whatever they took, and closes after
--gpu-steps steps; without --gpu-steps, DEFAULT_STEPS or as many as keep
the window within WINDOW_EVENT_BUDGET operator events (at least one), by
the events the observer ended in the steps before it (Kineto keeps every
event until its trace is exported). The trace is exported after the script
ends, so the export costs the script nothing, and Kineto's results are
let go at once, before the native analysis needs memory; stopping the
profiler costs the step that follows a little (the native analysis leaves
the window's steps and that one out of the CPU-side breakdown).

What records what (docs/coexistence.md): torchneck's RecordFunction
observer stays on throughout, Kineto adds its own callbacks for the window
only, and torch runs both for every operator. A script that runs
torch.profiler itself keeps it: the window yields (it is not opened, or it
is closed before the script's profiler starts), with a note.

Under detail windows (docs/overhead.md) the observer's operator detail is
held on (hold_detail) from the moment a window is to come until it closes:
the window's operators, which the clocks are aligned on, and its per-layer
GPU times need ours and the module calls; the detail windows go on after."""

import os
import sys
import tempfile
import time

from torchneck import output
from torchneck.os_bytes import shown

# The last steps agree within this share of their median: warm-up is over.
WINDOW_SETTLED_STEPS = 3
WINDOW_SETTLED_SPREAD = 0.25
# Never before this step (the first step alone is warm-up in every run) ...
WINDOW_EARLIEST_START = 2
# ... and at the latest after this many, settled or not.
WINDOW_LATEST_START = 20
# Steps in the window when --gpu-steps is not given: a few steady steps,
# as many as trace.json shows (--trace-steps) ...
DEFAULT_STEPS = 5
# ... but no more than hold this many operator events (at least one step).
# Kineto keeps a record of each (with its CPU-side metadata; with CUDA, the
# runtime call and the kernel too, a few KB each) until the trace is
# exported at the end: the budget keeps the window's memory to tens of MB
# however small the operators (docs/overhead.md has the figures), while a
# model of large operators still gets all DEFAULT_STEPS.
WINDOW_EVENT_BUDGET = 6000


def _clock_offset_ns():
    """CLOCK_MONOTONIC (ours) minus system time (Kineto's): of a few
    readings, the one whose two reads lay closest together."""
    best = None
    for _ in range(5):
        a = time.monotonic_ns()
        r = time.time_ns()
        b = time.monotonic_ns()
        if best is None or b - a < best[0]:
            best = (b - a, (a + b) // 2 - r)
    return best[1]


def _cuda_peaks():
    """torch's CUDA caching allocator's peaks over the run, per device, when
    the script initialised CUDA (asking never initialises it)."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return [], []
        n = torch.cuda.device_count()
        return ([int(torch.cuda.max_memory_allocated(d)) for d in range(n)],
                [int(torch.cuda.max_memory_reserved(d)) for d in range(n)])
    except Exception:  # noqa: BLE001 - a fact for the report, never an error
        return [], []


class GpuWindow:
    def __init__(self, mode, steps, out_dir, guard, hold_detail=None, events_ended=None):
        self.mode = mode
        self._hold_detail = hold_detail  # native: detail on (True) until let go (False)
        self._events_ended = events_ended  # native: the observer's events so far (None: --no-ops)
        self._sized = steps is None  # no --gpu-steps: sized by WINDOW_EVENT_BUDGET
        self.requested = DEFAULT_STEPS if steps is None else steps
        self.steps = self.requested  # what the window records: requested, or fewer when sized
        self._size_note = ""  # why fewer
        self.out_dir = out_dir
        self.guard = guard
        self.state = "off" if mode == "off" else "skipped"
        self.note = ""
        self.activities = []
        self.first_step = self.last_step = 0
        self.start_ns = self.end_ns = 0
        self.clock_offset_ns = 0
        self.trace_path = ""
        self._prof = None
        self._open = False
        self._done = mode == "off"
        self._ends = []  # perf_counter at the last steps' ends
        self._events = []  # the observer's events ended at the same steps' ends
        self._last_seen = 0  # optimizer steps ended so far

    # -- set-up ------------------------------------------------------------------

    def install(self, graphs):
        """Decides whether there is to be a window; hooks the step ends
        (graph_watch.GraphWatch's step listeners) when there is."""
        if self._done:
            return
        try:
            import torch
            import torch.profiler as tp
        except Exception as e:  # noqa: BLE001 - no torch profiler: no window
            self._give_up("unavailable", f"torch.profiler cannot be imported ({type(e).__name__}: {e})")
            return
        try:
            cuda = bool(torch.cuda.is_available())
        except Exception:  # noqa: BLE001 - a broken CUDA install is no GPU
            cuda = False
        if self.mode == "auto" and not cuda:
            self._give_up("no_gpu", "")
            return
        kineto = getattr(tp, "kineto_available", None)
        if kineto is None or not kineto():
            self._give_up("unavailable", f"this torch ({torch.__version__}) was built without Kineto")
            return
        self.activities = ["cpu"] + (["cuda"] if cuda else [])
        self._tp = tp
        self._hold(True)
        self.guard.script_profiler_hook = self._yield_to_script
        graphs.step_listeners.append(self._on_step)

    def _give_up(self, state, note):
        self.state, self.note, self._done = state, note, True
        self._hold(False)

    def _hold(self, on):
        if self._hold_detail is not None:
            try:
                self._hold_detail(on)
            except Exception:  # noqa: BLE001 - the detail's schedule, never the script's failure
                pass

    # -- the window --------------------------------------------------------------

    def _settled(self, step):
        if step < WINDOW_EARLIEST_START:
            return False
        if step >= WINDOW_LATEST_START:
            return True
        ends = self._ends
        if len(ends) < WINDOW_SETTLED_STEPS + 1:
            return False
        d = sorted(ends[-k] - ends[-k - 1] for k in range(1, WINDOW_SETTLED_STEPS + 1))
        median = d[len(d) // 2]
        return median > 0 and (d[-1] - d[0]) <= WINDOW_SETTLED_SPREAD * median

    def _on_step(self, step):
        self._last_seen = step
        if self._done:
            return
        self._ends.append(time.perf_counter())
        if len(self._ends) > WINDOW_SETTLED_STEPS + 1:
            del self._ends[0]
        try:
            if not self._open:
                if self._sized and self._events_ended is not None:
                    self._events.append(int(self._events_ended()))
                    if len(self._events) > WINDOW_SETTLED_STEPS + 1:
                        del self._events[0]
                if self._settled(step):
                    self._size()
                    self._start(step + 1)
            elif step >= self.first_step + self.steps - 1:
                self._stop(step, "")
        except Exception as e:  # noqa: BLE001 - the window must never break the script
            self._fail(f"{type(e).__name__}: {e}")

    def _size(self):
        """Without --gpu-steps: DEFAULT_STEPS, or fewer so that the window
        holds about WINDOW_EVENT_BUDGET operator events, by the median of
        the events the last steps ended (the detail is held on through
        them, so every operator is counted)."""
        ev = self._events
        if not self._sized or len(ev) < 2:
            return
        per = sorted(b - a for a, b in zip(ev, ev[1:]))[(len(ev) - 1) // 2]
        if per <= 0:
            return
        fit = max(1, min(self.requested, WINDOW_EVENT_BUDGET // per))
        if fit < self.requested:
            self.steps = fit
            self._size_note = (f"{fit} step{'' if fit == 1 else 's'}, not {self.requested}: "
                               f"~{per:,} operator events a step, and Kineto keeps each until the run's end "
                               f"(--gpu-steps N records N)")

    def _start(self, first_step):
        acts = [self._tp.ProfilerActivity.CPU]
        if "cuda" in self.activities:
            acts.append(self._tp.ProfilerActivity.CUDA)
        prof = self._tp.profile(activities=acts, record_shapes=False, profile_memory=False, with_stack=False)
        self.clock_offset_ns = _clock_offset_ns()
        with self.guard.own_calls():
            prof.start()
        self._prof, self._open = prof, True
        self.first_step = first_step
        self.start_ns = time.monotonic_ns()

    def _stop(self, last_step, note):
        self.last_step = last_step
        self._open, self._done = False, True
        try:
            with self.guard.own_calls():
                self._prof.stop()
        finally:
            self._hold(False)
        self.end_ns = time.monotonic_ns()  # with the stop's cost: the step it lands in is not steady either
        self.state, self.note = "recorded", "; ".join(n for n in (self._size_note, note) if n)

    def _fail(self, why):
        self._hold(False)
        self._open, self._done = False, True
        self._prof = None
        self.state, self.note = "failed", f"torch.profiler failed: {why}"

    def _yield_to_script(self):
        """The script starts torch.profiler itself: Kineto takes one session
        at a time, and the script's comes first."""
        if self._done:
            return
        if self._open:
            try:
                self._stop(self._last_seen, "")
            except Exception as e:  # noqa: BLE001
                self._fail(f"{type(e).__name__}: {e}")
                return
            self.note = "; ".join(n for n in (self._size_note, "closed early: the script started torch.profiler itself") if n)
        else:
            self._give_up("skipped", "not recorded: the script runs torch.profiler itself")

    # -- the end -----------------------------------------------------------------

    def finish(self, steps_seen):
        """At the run's end: closes a window the script's end cut short, and
        exports the trace (after the script: the export costs it nothing)."""
        if self._open:
            try:
                self._stop(steps_seen, f"cut short: the script ended after step {steps_seen}")
            except Exception as e:  # noqa: BLE001
                self._fail(f"{type(e).__name__}: {e}")
        if self.state == "skipped" and not self.note and self.mode != "off":
            self.note = (f"not recorded: the script ended after {steps_seen} optimizer step"
                         f"{'' if steps_seen == 1 else 's'}, before the window's first" if steps_seen
                         else "not recorded: the script made no optimizer step")
        if self.state != "recorded" or self._prof is None:
            return
        path = os.path.join(self.out_dir, "gpu", "kineto.trace.json")
        try:
            # torch writes through whatever is at the name it is given: a
            # fresh private folder's name, then renamed into place.
            with tempfile.TemporaryDirectory(dir=output.subfolder(self.out_dir, "gpu"), prefix=".export-") as private:
                exported = os.path.join(private, "kineto.trace.json")
                self._prof.export_chrome_trace(exported)
                if not os.path.isfile(exported):
                    raise OSError("no file was written")
                os.replace(exported, path)
            self.trace_path = path
        except Exception as e:  # noqa: BLE001
            self.state, self.note = "failed", f"the trace could not be exported to {path}: {type(e).__name__}: {e}"
        self._let_go()

    def _let_go(self):
        """Kineto's results, ~2.4 KB an event, freed now rather than with the
        profiler object, which torch.profiler.profile keeps in a reference
        cycle (its action map holds its own bound methods) until a garbage
        collection: the native analysis that follows reuses their memory
        instead of adding to it."""
        inner = getattr(self._prof, "profiler", None)
        for owner in (inner, self._prof):
            if owner is not None and hasattr(owner, "kineto_results"):
                try:
                    owner.kineto_results = None
                except Exception:  # noqa: BLE001 - a torch whose object refuses: freed at its collection
                    pass
        self._prof = None

    def facts(self, native):
        w = native.GpuWindow()
        w.mode = self.mode
        w.state = self.state
        w.note = shown(self.note)
        w.trace_path = os.fsencode(self.trace_path)  # read by the analysis: the bytes of the path
        w.activities = list(self.activities)
        w.requested_steps = self.requested
        w.first_step, w.last_step = self.first_step, self.last_step
        w.start_ns, w.end_ns = self.start_ns, self.end_ns
        w.clock_offset_ns = self.clock_offset_ns
        w.cuda_peak_allocated, w.cuda_peak_reserved = _cuda_peaks()
        return w
