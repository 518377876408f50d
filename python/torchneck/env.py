"""Environment facts only Python can see: versions, usable cores, torch
threads, CUDA, and every DataLoader the script creates (by wrapping
DataLoader.__init__ for the length of the run; behaviour is unchanged)."""

import functools
import os
import platform
import sys
import threading
import weakref

from torchneck import facts


def _usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 0


def _int_or_none(value):
    """A DataLoader attribute that is an int or None; anything else (a
    subclass's own idea) is None, so recording it never breaks the script."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _user_frame():
    """file:line of the innermost frame outside torch and torchneck."""
    here = os.path.dirname(os.path.abspath(__file__))
    import torch

    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    f = sys._getframe(2)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(torch_dir) and not fn.startswith(here):
            return f"{os.path.basename(fn)}:{f.f_lineno}"
        f = f.f_back
    return "?"


class EnvCollector:
    def __init__(self):
        self.dataloaders = []
        self.notes = []
        self.optimizers = []
        self._seen = weakref.WeakSet()  # ids could be reused by later objects
        self.on_change = None  # called after a new DataLoader or optimizer is recorded
        self.on_dataloader = None  # called with each new DataLoader
        self.on_optimizer = None  # called with each new optimizer
        self._wrapped = []  # (class, original __init__)

    def install(self):
        """Wraps DataLoader.__init__ and Optimizer.__init__ so each new
        object is recorded once (subclasses calling super() included)."""
        from torch.optim import Optimizer
        from torch.utils.data import DataLoader

        self._wrap(DataLoader, self._record_loader)
        # How many optimizers step per iteration (a GAN has two).
        self._wrap(Optimizer, self._record_optimizer)

    def _wrap(self, cls, record):
        original = cls.__init__
        seen = self._seen

        @functools.wraps(original)
        def __init__(obj, *args, **kwargs):
            original(obj, *args, **kwargs)
            try:
                if obj in seen:
                    return
                seen.add(obj)
            except TypeError:  # not weak-referenceable: record every call
                pass
            record(obj)
            if self.on_change is not None:
                self.on_change()

        cls.__init__ = __init__
        self._wrapped.append((cls, original))

    def uninstall(self):
        for cls, original in reversed(self._wrapped):
            cls.__init__ = original
        self._wrapped.clear()

    def _record_optimizer(self, opt):
        groups = getattr(opt, "param_groups", [])
        foreach = bool(getattr(opt, "defaults", {}).get("foreach")) or any(g.get("foreach") for g in groups)
        self.optimizers.append(facts.optimizer_facts(
            type=type(opt).__name__,
            param_tensors=sum(len(g.get("params", [])) for g in groups),
            foreach=foreach,
        ))
        if self.on_optimizer is not None:
            self.on_optimizer(opt)

    def _record_loader(self, loader):
        self._record(loader)
        if self.on_dataloader is not None:
            self.on_dataloader(loader)

    def _record(self, loader):
        workers = int(getattr(loader, "num_workers", 0) or 0)
        prefetch = _int_or_none(getattr(loader, "prefetch_factor", None))
        self.dataloaders.append(facts.dataloader_facts(
            num_workers=workers,
            batch_size=_int_or_none(getattr(loader, "batch_size", None)),
            pin_memory=bool(getattr(loader, "pin_memory", False)),
            persistent_workers=bool(getattr(loader, "persistent_workers", False)),
            # Only meaningful with worker processes (torch 2.x reports None otherwise).
            prefetch_factor=prefetch if workers > 0 else None,
            dataset_type=type(getattr(loader, "dataset", None)).__name__,
            created_at=_user_frame(),
        ))

    def snapshot(self, probe_cuda=True):
        """probe_cuda=False (spills, while the script runs): report CUDA only
        if the script initialised it, never touching the driver ourselves
        before the script's own CUDA set-up and its DataLoader forks."""
        import torch

        try:
            if probe_cuda:
                cuda = bool(torch.cuda.is_available())
            else:
                cuda = bool(torch.cuda.is_initialized())
        except Exception:  # noqa: BLE001 - a broken driver is "not available"
            cuda = False
        return facts.env_facts(
            python=platform.python_version(),
            torch=str(torch.__version__),
            cpu_cores=_usable_cores(),
            torch_threads=int(torch.get_num_threads()),
            cuda=cuda,
            dataloaders=self.dataloaders,
            optimizers=self.optimizers,
        )


def machine_cpu():
    """(CPU seconds every process on the machine has used since boot, seconds
    a hypervisor gave its CPUs to other guests), from /proc/stat's first line;
    (-1, -1) where unknown. Two readings apart give the run's."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        ticks = os.sysconf("SC_CLK_TCK")
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    except (OSError, ValueError, IndexError):
        return -1.0, -1.0
    return (user + nice + system + irq + softirq) / ticks, steal / ticks


def thread_names():
    """Linux thread id -> Python thread name, for threads still alive."""
    names = {}
    for t in threading.enumerate():
        tid = getattr(t, "native_id", None)
        if tid is not None:
            names[int(tid)] = t.name
    return names
