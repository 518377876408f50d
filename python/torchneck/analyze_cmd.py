"""`python -m torchneck analyze ...`: the same native binary that
`./torchneck analyze` execs, with the same arguments; Python only checks
them first (with the same parser rules, options.py) and gets out of the way.
`analyze` reads Kineto traces in C++ and needs neither Python nor torch.
`diff` (torchneck-diff, src/tools/diff_main.cc) is native too: its
arguments go to it unread."""

import glob
import os

from torchneck.errors import UsageError

# The native binary: in this package's folder when torchneck was installed
# by pip (pyproject.toml: CMake installs it next to the extension); else where
# `make build` puts it, <root>/build/, next to <root>/python/torchneck/.
_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))


def native(binary):
    installed = os.path.join(_HERE, binary)
    return installed if os.path.exists(installed) else os.path.join(_ROOT, "build", binary)


NATIVE = native("torchneck-analyze")

# glibc's malloc in transparent huge pages, unless the user chose otherwise:
# what ./torchneck sets for analyze too (docs/analyze.md measures it).
_TUNABLES = "glibc.malloc.hugetlb=1"


def exec_native(args, binary="torchneck-analyze"):
    """Replaces this process by BINARY ARGS; returns only by a UsageError
    when the binary is not there."""
    path = native(binary)
    if not os.access(path, os.X_OK):
        if glob.glob(os.path.join(os.path.dirname(_HERE), "torchneck-*.dist-info")):  # pip installed it
            raise UsageError(f"{binary} is missing from {_HERE}; "
                             "reinstall torchneck (pip install --no-build-isolation .)")
        raise UsageError(f"{binary} is not built (no build/{binary}); "
                         "run `make build` in the torchneck folder")
    env = dict(os.environ)
    env.setdefault("GLIBC_TUNABLES", _TUNABLES)
    try:
        os.execve(path, [path, *args], env)
    except OSError as e:
        raise UsageError(f"cannot start {path}: {e.strerror or e}") from None


def run(parsed):
    """PARSED was the check; the binary reads the arguments again itself."""
    return exec_native(parsed.argv)
