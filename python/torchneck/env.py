"""Environment facts only Python can see: versions, usable cores, torch
threads, CUDA, and every DataLoader the script creates (by wrapping
DataLoader.__init__ for the length of the run; behaviour is unchanged)."""

import functools
import os
import platform
import sys
import threading


def _usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 0


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
        self._seen = set()
        self._original_init = None
        self._original_opt_init = None

    def install(self):
        try:
            from torch.utils.data import DataLoader
        except ImportError as e:  # pragma: no cover - torch without data utils
            self.notes.append(f"DataLoader settings not recorded: {e}")
            return
        original = DataLoader.__init__
        collector = self

        @functools.wraps(original)
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if id(self) not in collector._seen:
                collector._seen.add(id(self))
                collector._record(self)

        DataLoader.__init__ = __init__
        self._original_init = original

        # Optimizers: how many step per iteration (a GAN has two) and their settings.
        from torch.optim import Optimizer

        original_opt = Optimizer.__init__

        @functools.wraps(original_opt)
        def opt_init(self, *args, **kwargs):
            original_opt(self, *args, **kwargs)
            if id(self) not in collector._seen:
                collector._seen.add(id(self))
                collector._record_optimizer(self)

        Optimizer.__init__ = opt_init
        self._original_opt_init = original_opt

    def uninstall(self):
        if self._original_init is not None:
            from torch.utils.data import DataLoader

            DataLoader.__init__ = self._original_init
            self._original_init = None
        if self._original_opt_init is not None:
            from torch.optim import Optimizer

            Optimizer.__init__ = self._original_opt_init
            self._original_opt_init = None

    def _record_optimizer(self, opt):
        groups = getattr(opt, "param_groups", [])
        foreach = bool(getattr(opt, "defaults", {}).get("foreach")) or any(g.get("foreach") for g in groups)
        self.optimizers.append({
            "type": type(opt).__name__,
            "param_tensors": sum(len(g.get("params", [])) for g in groups),
            "foreach": foreach,
        })

    def _record(self, loader):
        workers = int(getattr(loader, "num_workers", 0) or 0)
        prefetch = getattr(loader, "prefetch_factor", None)
        self.dataloaders.append({
            "num_workers": workers,
            "batch_size": getattr(loader, "batch_size", None),
            "pin_memory": bool(getattr(loader, "pin_memory", False)),
            "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
            # Only meaningful with worker processes (torch 2.x reports None otherwise).
            "prefetch_factor": prefetch if workers > 0 else None,
            "dataset": type(getattr(loader, "dataset", None)).__name__,
            "created_at": _user_frame(),
        })

    def snapshot(self):
        import torch

        try:
            cuda = bool(torch.cuda.is_available())
        except Exception:  # noqa: BLE001 - a broken driver is "not available"
            cuda = False
        return {
            "python": platform.python_version(),
            "torch": str(torch.__version__),
            "cpu_cores": _usable_cores(),
            "torch_threads": int(torch.get_num_threads()),
            "cuda": cuda,
            "dataloaders": self.dataloaders,
            "optimizers": self.optimizers,
        }


def thread_names():
    """Linux thread id -> Python thread name, for threads still alive."""
    names = {}
    for t in threading.enumerate():
        tid = getattr(t, "native_id", None)
        if tid is not None:
            names[int(tid)] = t.name
    return names
