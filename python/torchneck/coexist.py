"""Coexistence with profilers and hooks the script installs itself
(torch.profiler, torch.autograd.profiler, cProfile, sys.setprofile,
threading.setprofile): the script keeps working, and the report says which
of our collectors had to stand aside and why (docs/coexistence.md).

Guard(options).install() runs just before the script starts, uninstall()
just after it ends (whatever the ending); notes() returns the lines for
the report's notes (run.notes in profile.json).

How the collectors meet the script's own tools:
- --python=trace is a C profile hook on every thread (PyEval_SetProfile) and
  threading.setprofile for new threads. A thread has ONE profile function:
  sys.setprofile, cProfile.enable() and torch.profiler(with_stack=True)
  replace ours (on 3.12+ cProfile uses sys.monitoring and would run next to
  ours; we step aside for it all the same, so its times stay its own).
  We cannot stop that without changing what the script gets,
  so we step aside cleanly (our hook is removed before theirs goes in, so
  their profiler sees the same events as under plain Python), say so in a
  note, and put our hook back on that thread when theirs is removed
  (sys.setprofile(None), cProfile's disable(), the torch profiler's exit).
- --python=sample is a sampler thread: it coexists with everything.
- The operator observer is a global RecordFunction callback: it runs next to
  torch.profiler / torch.autograd.profiler, but their work inflates the
  operator times we measure, which a note says.

The wrappers are transparent: the same arguments reach the original, its
return value and exceptions come back unchanged, nothing runs unless the
script calls them, and uninstall() puts the originals back."""

import contextlib
import functools
import os
import sys
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))


def _module_file(name):
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    return os.path.abspath(path) if path else None


class _Seen:
    """The first time the script used one kind of tool, and what followed."""

    def __init__(self, kind, where, thread, detail):
        self.kind = kind
        self.where = where      # "file.py:12" of the script's call
        self.thread = thread    # thread name of the first use
        self.detail = detail    # which torch profiler took the threads
        self.until = None       # "file.py:30" where our tracer came back
        self.others = set()     # other threads where the same happened


class Guard:
    def __init__(self, options):
        self.options = options
        self._mode = getattr(options, "python_mode", "sample")
        self._ops = getattr(options, "ops", True)
        self._lock = threading.Lock()
        self._seen = {}          # kind -> _Seen, in first-use order
        self._away = {}          # thread ident -> kind that displaced our tracer
        self._undo = []          # (owner, name, had its own attribute, original, wrapper)
        self._active = False
        self._own = 0            # > 0 while torchneck itself starts or stops a torch profiler
        # Called before the script starts a torch profiler (the GPU window
        # yields to it: gpu_window.py).
        self.script_profiler_hook = None
        self._hook_type = None   # type of our tracer's per-thread hook object (trace mode)
        self._bootstrap = None   # what our tracer gave threading.setprofile
        self._skip_files = set()
        self._skip_dirs = (_HERE + os.sep,)
        self._real_setprofile = sys.setprofile
        self._threading_file = None

    # -- install / uninstall ------------------------------------------------

    def install(self):
        if self._mode == "trace":
            hook = sys.getprofile()
            if hook is not None and type(hook).__module__ == "torchneck":
                self._hook_type = type(hook)
                boot = getattr(threading, "_profile_hook", None)
                if getattr(boot, "__name__", "") == "_torchneck_thread_profile":
                    self._bootstrap = boot
        skip_dirs = [_HERE]
        torch_dir = _module_file("torch")
        if torch_dir:
            skip_dirs.append(os.path.dirname(torch_dir))
        self._skip_dirs = tuple(d + os.sep for d in skip_dirs)
        import cProfile

        for name in ("profile", "contextlib", "runpy"):  # helpers between the script and its call
            try:
                __import__(name)
            except ImportError:
                pass
        self._skip_files = {f for f in (_module_file(m) for m in (
            "cProfile", "profile", "threading", "contextlib", "runpy")) if f}
        self._threading_file = _module_file("threading")
        self._real_setprofile = sys.setprofile
        self._patch(sys, "setprofile", self._wrap_sys_setprofile(sys.setprofile))
        self._patch(threading, "setprofile", self._wrap_thread_setprofile(threading.setprofile, False))
        if hasattr(threading, "setprofile_all_threads"):  # Python 3.12+
            self._patch(threading, "setprofile_all_threads",
                        self._wrap_thread_setprofile(threading.setprofile_all_threads, True))
        self._patch_method(cProfile.Profile, "enable", self._wrap_cprofile_enable)
        self._patch_method(cProfile.Profile, "disable", self._wrap_restoring)
        self._install_torch()
        self._active = True

    def _install_torch(self):
        if "torch" not in sys.modules:
            return
        try:
            import torch.autograd.profiler as autograd_profiler
        except Exception:  # noqa: BLE001 - a torch without it has nothing to guard
            return
        cls = getattr(autograd_profiler, "profile", None)
        if cls is not None:
            # _start_trace is where both torch.profiler (also from a schedule's
            # step()) and torch.autograd.profiler's __enter__ turn profiling on.
            start = "_start_trace" if hasattr(cls, "_start_trace") else "__enter__"
            self._patch_method(cls, start, self._wrap_torch_start)
            self._patch_method(cls, "__exit__", self._wrap_restoring)
            # torch.profiler prepares Kineto before it starts it: the GPU
            # window must have yielded by then.
            self._patch_method(cls, "_prepare_trace", self._wrap_torch_prepare)
        legacy = sys.modules.get("torch.autograd.profiler_legacy")
        if legacy is None:
            try:
                import torch.autograd.profiler_legacy as legacy
            except Exception:  # noqa: BLE001 - absent in some versions
                legacy = None
        legacy_cls = getattr(legacy, "profile", None)
        if legacy_cls is not None and legacy_cls is not cls and hasattr(legacy_cls, "__enter__"):
            self._patch_method(legacy_cls, "__enter__", self._wrap_torch_start)

    def _patch(self, owner, name, wrapper):
        had = name in vars(owner)
        original = vars(owner)[name] if had else None
        setattr(owner, name, wrapper)
        self._undo.append((owner, name, had, original, wrapper))

    def _patch_method(self, cls, name, make):
        original = getattr(cls, name, None)
        if original is None:
            return
        try:
            self._patch(cls, name, make(original))
        except (TypeError, AttributeError):  # an immutable type: leave it alone
            pass

    def uninstall(self):
        self._active = False
        for owner, name, had, original, wrapper in reversed(self._undo):
            try:
                if vars(owner).get(name) is not wrapper:
                    continue  # the script replaced it since: its choice stays
                if had:
                    setattr(owner, name, original)
                else:
                    delattr(owner, name)
            except (TypeError, AttributeError):
                pass
        self._undo.clear()

    # -- where a call came from ---------------------------------------------

    def _ours(self, frame):
        """A call made by torchneck itself (the native tracer calls
        threading.setprofile at start and stop, from the launcher's frames)."""
        return frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(self._skip_dirs[0])

    def _where(self, frame):
        """file:line of the innermost frame that is the script's own, not
        torch's, torchneck's or the standard library helpers'."""
        while frame is not None:
            path = os.path.abspath(frame.f_code.co_filename)
            if not path.startswith(self._skip_dirs) and path not in self._skip_files:
                return f"{os.path.basename(path)}:{frame.f_lineno}"
            frame = frame.f_back
        return "?"

    def _from_torch_profiler(self, frame):
        marker = os.sep + os.path.join("torch", "profiler") + os.sep
        while frame is not None:
            if marker in frame.f_code.co_filename:
                return True
            frame = frame.f_back
        return False

    # -- our tracer on this thread ------------------------------------------

    def _ours_here(self):
        return self._hook_type is not None and type(sys.getprofile()) is self._hook_type

    def _step_aside(self):
        """Removes our hook from this thread before the script's own goes in,
        so the script's profiler does not receive the return of a call it
        never saw begin (torch's Python tracer asserts on that)."""
        self._real_setprofile(None)

    def _rearm(self):
        """Puts our tracer back on this thread: the bootstrap our tracer gave
        threading.setprofile installs the C hook on the first event it sees,
        as it does on a new thread. Only while our tracer runs (the
        bootstrap is then still threading's hook, or was ours to replace)."""
        if self._bootstrap is None or not self._active:
            return False
        self._real_setprofile(self._bootstrap)
        return self._ours_here()

    def _came_back(self, frame, ours_before=False):
        """After the script removed a profiler from this thread: our tracer
        returns if the script's had displaced it there, or if the removal
        took our own hook (cProfile's disable() clears the thread's hook
        whoever set it; pstats.Stats(profiler) calls it)."""
        ident = threading.get_ident()
        kind = self._away.get(ident)
        if (kind is None and not ours_before) or sys.getprofile() is not None:
            return
        if self._rearm() and kind is not None:
            self._away.pop(ident, None)
            self._close(kind, threading.current_thread().name, frame)

    def _close(self, kind, thread, frame):
        """The first displacement of this kind ended (on its first thread)."""
        with self._lock:
            seen = self._seen.get(kind)
            if seen is not None and seen.until is None and (thread is None or seen.thread == thread):
                seen.until = self._where(frame)

    def _record(self, kind, frame, detail=None):
        try:
            name = threading.current_thread().name
            where = self._where(frame)
        except Exception:  # noqa: BLE001 - bookkeeping never breaks the script
            name, where = "?", "?"
        with self._lock:
            seen = self._seen.get(kind)
            if seen is None:
                self._seen[kind] = _Seen(kind, where, name, detail)
            elif name != seen.thread:
                seen.others.add(name)

    def _displaced(self, kind, frame, detail=None, note=True):
        self._away[threading.get_ident()] = kind
        if note:
            self._record(kind, frame, detail)

    def _undo_displaced(self):
        """The script's profiler did not take the thread after all."""
        self._away.pop(threading.get_ident(), None)
        if sys.getprofile() is None:
            self._rearm()

    # -- the wrappers --------------------------------------------------------
    # Bookkeeping happens before the script's profiler is switched on, so
    # that profiler does not see (and count) our own code.

    def _passthrough(self, caller):
        return not self._active or self._own > 0 or self._ours(caller)

    @contextlib.contextmanager
    def own_calls(self):
        """torchneck's own torch profiler calls (the GPU window): not the
        script's, so neither recorded nor guarded."""
        self._own += 1
        try:
            yield
        finally:
            self._own -= 1

    def _wrap_sys_setprofile(self, original):
        guard = self

        def set_after_return(function, frame):
            """original(function) as the caller would see it: under plain
            Python the new profile function's first event comes from the
            caller, not from a wrapper's return (profile.Profile asserts on
            that). A shim takes the events up to this wrapper's return, then
            hands the thread to `function`."""
            def shim(f, event, arg):
                inside = f
                while inside is not None and inside is not frame:
                    inside = inside.f_back
                if inside is None or (f is frame and event == "return"):
                    original(function)

            original(shim)

        @functools.wraps(original)
        def setprofile(*args, **kwargs):
            if len(args) != 1 or kwargs:
                return original(*args, **kwargs)  # the same error
            function = args[0]
            caller = sys._getframe(1)
            ours = function is not None and function is guard._bootstrap
            if (guard._passthrough(caller) or ours
                    or os.path.abspath(caller.f_code.co_filename) == guard._threading_file):
                # threading's new-thread bootstrap applies threading.setprofile's
                # function (ours, or the script's, noted there).
                if function is None or ours:
                    return original(function)
                return set_after_return(function, sys._getframe())
            if function is None:
                ours_before = guard._ours_here()
                result = original(None)
                if ours_before:
                    guard._rearm()  # it cleared our hook, not one of its own
                elif guard._away:
                    guard._came_back(caller)
                return result
            if guard._hook_type is None:
                guard._record("sys.setprofile", caller)
            elif guard._ours_here():
                guard._displaced("sys.setprofile", caller)
                guard._step_aside()
            return set_after_return(function, sys._getframe())

        return setprofile

    def _wrap_thread_setprofile(self, original, all_threads):
        guard = self
        kind = "threading.setprofile_all_threads" if all_threads else "threading.setprofile"

        @functools.wraps(original)
        def setprofile(*args, **kwargs):
            caller = sys._getframe(1)
            if (guard._passthrough(caller) or len(args) + len(kwargs) != 1
                    or os.path.abspath(caller.f_code.co_filename) == guard._threading_file):
                return original(*args, **kwargs)
            function = args[0] if args else next(iter(kwargs.values()))
            if function is None:
                result = original(*args, **kwargs)
                if guard._bootstrap is not None and not all_threads:
                    original(guard._bootstrap)  # threads started from now on are traced again
                    guard._close(kind, None, caller)
                return result
            if function is not guard._bootstrap:
                guard._record(kind, caller)
            return original(*args, **kwargs)

        return setprofile

    def _wrap_cprofile_enable(self, original):
        guard = self

        @functools.wraps(original)
        def enable(profiler, *args, **kwargs):
            caller = sys._getframe(1)
            if guard._passthrough(caller):
                return original(profiler, *args, **kwargs)
            if guard._hook_type is None:
                guard._record("cProfile", caller)
                return original(profiler, *args, **kwargs)
            # On 3.12+ cProfile uses sys.monitoring and leaves the thread's
            # profile function alone, so both would run: we step aside all the
            # same, so that its times do not include our hook's cost and it
            # behaves as on 3.11 (disable() brings our tracer back).
            if not guard._ours_here():
                return original(profiler, *args, **kwargs)
            guard._displaced("cProfile", caller)
            guard._step_aside()
            try:
                return original(profiler, *args, **kwargs)
            except BaseException:
                guard._undo_displaced()
                raise

        return enable

    def _wrap_torch_prepare(self, original):
        guard = self

        @functools.wraps(original)
        def prepare(profiler, *args, **kwargs):
            caller = sys._getframe(1)
            if (not guard._passthrough(caller) and getattr(profiler, "enabled", True)
                    and guard.script_profiler_hook is not None):
                guard.script_profiler_hook()
            return original(profiler, *args, **kwargs)

        return prepare

    def _wrap_torch_start(self, original):
        guard = self

        @functools.wraps(original)
        def start(profiler, *args, **kwargs):
            caller = sys._getframe(1)
            if guard._passthrough(caller) or not getattr(profiler, "enabled", True):
                return original(profiler, *args, **kwargs)
            if guard.script_profiler_hook is not None:
                guard.script_profiler_hook()
            kind = "torch.profiler" if guard._from_torch_profiler(caller) else "torch.autograd.profiler"
            guard._record(kind, caller)
            if not guard._ours_here():
                return original(profiler, *args, **kwargs)
            # torch's Python tracer (with_stack=True) takes every thread; it
            # must not receive the return of the call that started it.
            guard._displaced("torch-python-tracer", caller, kind, note=False)
            guard._step_aside()
            try:
                result = original(profiler, *args, **kwargs)
            except BaseException:
                guard._undo_displaced()
                raise
            if sys.getprofile() is None:
                guard._undo_displaced()  # torch did not take the thread
            else:
                guard._record("torch-python-tracer", caller, kind)
            return result

        return start

    def _wrap_restoring(self, original):
        """cProfile's disable(), the torch profiler's __exit__: the script's
        profiler leaves the thread, and our tracer comes back there."""
        guard = self

        @functools.wraps(original)
        def restoring(profiler, *args, **kwargs):
            if not guard._active or guard._hook_type is None:
                return original(profiler, *args, **kwargs)
            ours_before = guard._ours_here()
            try:
                return original(profiler, *args, **kwargs)
            finally:
                if ours_before or guard._away:
                    try:
                        guard._came_back(sys._getframe(1), ours_before)
                    except Exception:  # noqa: BLE001 - bookkeeping never breaks the script
                        pass

        return restoring

    # -- the report's notes ------------------------------------------------------

    def notes(self):
        with self._lock:
            seen = list(self._seen.values())
        return [self._note(s) for s in seen]

    def _note(self, s):
        others = ""
        if s.others:
            n = len(s.others)
            others = f" (and {n} other thread{'s' if n > 1 else ''})"
        span = f" until {s.until}" if s.until else ""
        missing = "between those points" if s.until else "after that point"
        effect = ("operator times include its overhead" if self._ops
                  else "times in this report include its overhead")
        if s.kind in ("torch.profiler", "torch.autograd.profiler"):
            return (f"{s.kind} was active during the run (from {s.where}): torchneck's collectors ran "
                    f"alongside it, and {effect}")
        if s.kind == "torch-python-tracer":
            back = (f" until {s.until} (on thread {s.thread}; other threads stayed untraced to the end)"
                    if s.until else "")
            return (f"python tracer stood aside on every thread from {s.where}{back}: {s.detail}(with_stack=True) "
                    "installs its own Python tracer on every thread, and a thread has only one profile "
                    "function; Python statistics miss that time")
        if self._hook_type is not None:  # trace mode: our tracer had to give way
            if s.kind == "sys.setprofile":
                why = "the script installed its own profile function (sys.setprofile), and a thread has only one"
            elif s.kind == "cProfile":
                why = "the script ran its own cProfile there, and a thread has only one profile function"
            elif s.kind == "threading.setprofile":
                return (f"python tracer stood aside for threads started after {s.where}{span}: the script set its "
                        "own profile function for new threads (threading.setprofile); Python statistics miss "
                        "those threads")
            else:  # threading.setprofile_all_threads
                return (f"python tracer stood aside on every thread from {s.where}: the script set its own profile "
                        "function on every thread (threading.setprofile_all_threads); Python statistics miss "
                        "the time after that point")
            which = "those threads" if s.others else "that thread"
            return (f"python tracer stood aside on thread {s.thread}{others} from {s.where}{span}: {why}; "
                    f"Python statistics miss {which} {missing}")
        what = {
            "sys.setprofile": "installed its own profile function (sys.setprofile",
            "cProfile": "ran its own cProfile (",
            "threading.setprofile": "set its own profile function for new threads (threading.setprofile",
            "threading.setprofile_all_threads": "set its own profile function on every thread "
                                                "(threading.setprofile_all_threads",
        }[s.kind]
        sep = "" if what.endswith("(") else ", "
        ours = ("the Python sampler kept sampling" if self._mode == "sample"
                else "the Python profile was off")
        return (f"the script {what}{sep}from {s.where}, thread {s.thread}{others}): {ours}, but the code it "
                "watched ran slower, and times in this report include that overhead")
