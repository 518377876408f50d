"""`torchneck run --try SETTING`: a recommended setting measured before the
user edits anything (docs/try.md).

After the profiled run, the script runs again, unprofiled, in fresh
processes: twice with the setting and twice without, in the order baseline,
try, try, baseline (a drift of the machine over the four runs cancels in
the comparison), each stopped cleanly after --try-steps optimizer steps
past its warm-up (SystemExit raised at the end of an optimizer step: the
script's `finally` blocks and context managers run, its DataLoader workers
are shut down). A child times its optimizer steps with perf_counter_ns and
writes them, with what it applied, to a JSON file; the native side turns
the step times into the gain and its interval (src/analyze/experiments.h).

A child is this module: `python -m torchneck.experiment --setting S|none
--steps N --warmup W --out PATH -- (SCRIPT | -m MODULE) [ARGS...]`.
"""

import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time

from torchneck.errors import UsageError
from torchneck.os_bytes import shown

# name -> (kind, lowest): what --try accepts.
SETTINGS = {
    "num_workers": ("int", 0),
    "prefetch_factor": ("int", 1),
    "pin_memory": ("bool", 0),
    "persistent_workers": ("bool", 0),
    "threads": ("int", 1),
    "cudnn_benchmark": ("bool", 0),
    "tf32": ("bool", 0),
    "autocast": ("dtype", 0),
}
# What autocast=... accepts: bfloat16 needs no loss scaling, so it can be
# put around the model from outside; float16 needs a GradScaler in the
# script's own backward and step, which the launcher cannot add.
AUTOCAST_DTYPES = ("bfloat16",)
_LOADER = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers")
# Warm-up optimizer steps left out of each child's timing (worker start-up,
# the allocator's first growth, lazy initialisation), as the profile's own
# warm-up rule leaves out its first steps.
WARMUP_STEPS = 3
# Runs per setting: baseline, try, try, baseline.
ORDER = ("baseline", "try", "try", "baseline")
# Settings `--try auto` takes from the findings, at most.
AUTO_MAX = 3


def parse_setting(text):
    """"num_workers=4" -> ("num_workers", 4); "auto" -> ("auto", None).
    Raises UsageError (one line) for anything else."""
    if text == "auto":
        return "auto", None
    name, eq, value = text.partition("=")
    if name not in SETTINGS or not eq:
        raise UsageError(f"--try takes auto or NAME=VALUE with NAME one of {', '.join(SETTINGS)}, not '{text}'")
    kind, lowest = SETTINGS[name]
    if kind == "dtype":
        if value not in AUTOCAST_DTYPES:
            why = (": float16 needs a GradScaler in the script's own backward and step, which --try cannot add"
                   if value == "float16" else "")
            raise UsageError(f"--try autocast must be {' or '.join(AUTOCAST_DTYPES)}, not '{value}'{why}")
        return name, value
    if kind == "bool":
        if value.lower() not in ("true", "false", "1", "0"):
            raise UsageError(f"--try {name} must be true or false, not '{value}'")
        return name, value.lower() in ("true", "1")
    if not value.isdigit() or int(value) < lowest or int(value) > 1024:
        raise UsageError(f"--try {name} must be an integer between {lowest} and 1024, not '{value}'")
    return name, int(value)


def canonical(name, value):
    return f"{name}={str(value).lower() if isinstance(value, bool) else value}"


# -- the child: one run of the script, timed, stopped after its steps --------


class _Stop(SystemExit):
    """Raised at the end of the last timed optimizer step."""


def _caller_site():
    """file:line of the first frame outside torch and this module."""
    f = sys._getframe(2)
    while f is not None:
        path = f.f_code.co_filename
        if f"{os.sep}torch{os.sep}" not in path and not path.endswith("experiment.py"):
            return f"{os.path.basename(path)}:{f.f_lineno}"
        f = f.f_back
    return "?"


class _Child:
    def __init__(self, name, value, steps, warmup):
        self.name, self.value = name, value
        self.limit = warmup + steps + 1  # step ends: warmup + steps durations after the first
        self.step_ends = []
        self.applied, self.notes = [], []
        self.state = "measured"
        self.loaders = 0

    def install(self):
        import torch

        self._hook_steps(torch)
        if self.name is None:
            return
        if self.name in _LOADER:
            self._patch_loader(torch)
        elif self.name == "threads":
            torch.set_num_threads(self.value)
            self.applied.append(f"torch.set_num_threads({self.value}) before the script")
            original = torch.set_num_threads
            child = self

            def set_num_threads(n):
                if n != child.value and child.state == "measured":
                    child.state = "overridden"
                    child.notes.append(f"the script calls torch.set_num_threads({n}) at {_caller_site()}: "
                                       f"threads={child.value} does not hold")
                return original(n)

            torch.set_num_threads = set_num_threads
        elif self.name == "autocast":
            self._autocast(torch)
        elif not torch.cuda.is_available():
            self.state = "not_applicable"
            self.notes.append(f"{self.name} changes CUDA work only, and CUDA is not available here")
        elif self.name == "cudnn_benchmark":
            torch.backends.cudnn.benchmark = self.value
            self.applied.append(f"torch.backends.cudnn.benchmark = {self.value}")
        else:  # tf32
            torch.backends.cuda.matmul.allow_tf32 = self.value
            torch.backends.cudnn.allow_tf32 = self.value
            self.applied.append(f"torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = "
                                f"{self.value}")

    def _autocast(self, torch):
        """Every outermost nn.Module call (the model, the loss module) runs
        under torch.autocast: what `with torch.autocast(...)` around the
        forward and the loss does; the backward and the step stay outside."""
        import threading

        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = getattr(torch, self.value)
        module = torch.nn.Module
        original = module.__call__
        depth = threading.local()
        child = self

        def __call__(m, *args, **kwargs):
            if getattr(depth, "n", 0):
                return original(m, *args, **kwargs)
            depth.n = 1
            child.loaders += 1  # counted as applied
            try:
                with torch.autocast(device, dtype=dtype):
                    return original(m, *args, **kwargs)
            finally:
                depth.n = 0

        module.__call__ = __call__
        self.applied.append(f"torch.autocast({device!r}, dtype=torch.{self.value}) around every outermost "
                            "nn.Module call (the model's forward, a loss module)")

    def _patch_loader(self, torch):
        import inspect

        cls = torch.utils.data.DataLoader
        original = cls.__init__
        signature = inspect.signature(original)
        child = self

        def __init__(loader, *args, **kwargs):
            bound = signature.bind_partial(loader, *args, **kwargs)
            given = bound.arguments.get(child.name, None)
            site = _caller_site()
            workers = bound.arguments.get("num_workers", 0)
            if child.name in ("prefetch_factor", "persistent_workers") and not workers:
                child.notes.append(f"the DataLoader at {site} has num_workers=0: {child.name} needs workers")
            else:
                bound.arguments[child.name] = child.value
                child.loaders += 1
                was = f" (the script passes {given!r})" if given is not None else " (the script leaves it at its default)"
                child.applied.append(f"DataLoader({child.name}={child.value}) at {site}{was}")
            original(*bound.args, **bound.kwargs)

        cls.__init__ = __init__

    def _hook_steps(self, torch):
        child = self

        def on_step():
            child.step_ends.append(time.perf_counter_ns())
            if len(child.step_ends) >= child.limit:
                raise _Stop(0)

        from torch.optim import optimizer as optim_mod

        register = getattr(optim_mod, "register_optimizer_step_post_hook", None)
        if register is not None:  # torch >= 2.0
            register(lambda opt, args, kwargs: on_step())
            return
        base_init = torch.optim.Optimizer.__init__
        wrapped = set()

        def __init__(opt, *args, **kwargs):
            base_init(opt, *args, **kwargs)
            cls = type(opt)
            if cls in wrapped or "step" not in cls.__dict__:
                return
            wrapped.add(cls)
            step = cls.__dict__["step"]

            def timed_step(self, *a, **k):
                result = step(self, *a, **k)
                on_step()
                return result

            timed_step.__wrapped__ = step
            for attr in ("hooked",):  # torch 1.13's profiling wrapper mark
                if hasattr(step, attr):
                    setattr(timed_step, attr, getattr(step, attr))
            cls.step = timed_step

        torch.optim.Optimizer.__init__ = __init__

    def result(self, warmup, error):
        d = [b - a for a, b in zip(self.step_ends, self.step_ends[1:])][warmup:]
        state = self.state
        notes = list(self.notes)
        if error:
            state, notes = "failed", notes + [error]
        elif state == "measured" and self.name in _LOADER and self.loaders == 0:
            state = "not_applicable"
            if not notes:
                notes.append("the script makes no DataLoader")
        elif state == "measured" and self.name == "autocast" and self.loaders == 0:
            state = "not_applicable"
            notes.append("the script calls no nn.Module")
        elif state == "measured" and len(self.step_ends) < 2:
            state = "failed"
            notes.append("no optimizer steps to time: --try measures optimizer.step() to optimizer.step()")
        return {"state": state, "applied": "; ".join(dict.fromkeys(self.applied)), "note": "; ".join(notes),
                "steps_ns": d, "steps_seen": len(self.step_ends)}


def child_main(argv):
    import argparse

    p = argparse.ArgumentParser(prog="torchneck.experiment")
    p.add_argument("--setting", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, default=WARMUP_STEPS)
    p.add_argument("--out", required=True)
    # The target after "--", untouched: SCRIPT ARGS... or -m MODULE ARGS...
    split = argv.index("--") if "--" in argv else len(argv)
    a = p.parse_args(argv[:split])
    target = argv[split + 1:]
    a.module, a.target = (target[1], target[2:]) if target[:1] == ["-m"] else (None, target)
    name, value = (None, None) if a.setting == "none" else parse_setting(a.setting)
    child = _Child(name, value, a.steps, a.warmup)
    error = None
    try:
        child.install()
        if a.module:
            sys.argv = [a.module] + a.target
            runpy.run_module(a.module, run_name="__main__", alter_sys=True)
        else:
            script = a.target[0]
            sys.argv = list(a.target)
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            runpy.run_path(script, run_name="__main__")
    except _Stop:
        pass
    except SystemExit as e:
        if e.code not in (None, 0):
            error = f"the script exited with status {e.code}"
    except BaseException as e:  # noqa: B902 - the script's own error, reported
        error = f"the script raised {type(e).__name__}: {e}"
    with open(a.out, "w") as f:
        json.dump(child.result(a.warmup, error), f)
    sys.stdout.flush()
    os._exit(0)  # the script's non-daemon threads and atexit work are not the measurement's


# -- the parent: the runs, in order -----------------------------------------


def settings_to_try(requested, out_dir):
    """The settings of one --try: the one given, or for auto those of the
    profile's findings (serious ones first, at most AUTO_MAX)."""
    name, value = parse_setting(requested)
    if name != "auto":
        return [canonical(name, value)], ""
    try:
        with open(os.path.join(out_dir, "profile.json")) as f:
            findings = json.load(f)["findings"]
    except (OSError, ValueError, KeyError):
        return [], "--try auto: the profile could not be read back"
    order = {"high": 0, "medium": 1, "low": 2}
    found = sorted((f for f in findings if f.get("try_setting")), key=lambda f: order.get(f["severity"], 3))
    settings = list(dict.fromkeys(f["try_setting"] for f in found))[:AUTO_MAX]
    return settings, "" if settings else "--try auto: no finding suggests a setting to try"


def run_experiments(native, settings, target, steps, timeout_s, progress):
    """native.Experiment facts, one per setting, from ORDER's runs of the
    script; `target` is (["SCRIPT", ARGS...] or ["-m", MODULE, ARGS...])."""
    experiments = []
    for setting in settings:
        e = native.Experiment()
        e.setting, e.warmup_steps = setting, WARMUP_STEPS
        e.state, notes, applied = "measured", [], ""
        sides = {"baseline": [], "try": []}
        for k, side in enumerate(ORDER):
            progress(f"torchneck: --try {setting}: run {k + 1} of {len(ORDER)} ({side}, {steps} steps)")
            got = _one_run(setting if side == "try" else "none", target, steps, timeout_s)
            if got["state"] != "measured":
                e.state = got["state"]
                notes.append(("baseline run: " if side == "baseline" else "") + got["note"])
                break
            if side == "try":
                applied = got["applied"]
            sides[side].extend(got["steps_ns"])
            if len(got["steps_ns"]) < steps:
                notes.append(f"the script took only {got['steps_seen']} optimizer steps (asked {steps} after "
                             f"{WARMUP_STEPS} of warm-up)")
            if got["note"]:
                notes.append(got["note"])
        e.applied = applied
        e.note = shown("; ".join(dict.fromkeys(notes)))  # a run's error may quote the script's arguments
        e.rounds = 2 if sides["baseline"] and sides["try"] and e.state == "measured" else 0
        e.baseline_ns, e.try_ns = sides["baseline"], sides["try"]
        experiments.append(e)
    return experiments


def _one_run(setting, target, steps, timeout_s):
    """One child run; its result file is in a private folder of its own
    (mode 0700), where no one else can plant a name for it to write through."""
    with tempfile.TemporaryDirectory(prefix="torchneck-try-") as private:
        return _run_child(setting, target, steps, timeout_s, os.path.join(private, "result.json"))


def _run_child(setting, target, steps, timeout_s, out):
    cmd = [sys.executable, "-m", "torchneck.experiment", "--setting", setting, "--steps", str(steps),
           "--warmup", str(WARMUP_STEPS), "--out", out, "--", *target]
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # A session of its own: a run past its time is killed with its
    # DataLoader workers, which would otherwise hold the stderr pipe open.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        return {"state": "failed", "note": f"a run did not stop within {timeout_s:.0f} s (the script cannot be "
                                           f"stopped after {steps} steps?)", "steps_ns": [], "applied": ""}
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    try:
        with open(out) as f:
            return json.load(f)
    except (OSError, ValueError):
        tail = " ".join(err.decode("utf-8", "replace").split()[-30:])
        return {"state": "failed", "note": f"a run ended with status {proc.returncode} and no result: {tail}",
                "steps_ns": [], "applied": ""}


if __name__ == "__main__":
    child_main(sys.argv[1:])
