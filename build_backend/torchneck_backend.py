"""The PEP 517 backend of `pip install --no-build-isolation .` (pyproject.toml).

1. Torch first. The extension is compiled against the torch that the building
   Python imports (CMakeLists.txt finds it through torch.utils.cmake_prefix_path
   and takes its C++ ABI from it), so a build without torch stops here with one
   line and exit status 1, before CMake or a compiler starts. Nothing here ever
   asks pip for torch (or anything else: every get_requires hook answers []).
2. Then the build: scikit-build-core, the standard backend for CMake
   extensions, when the building Python has it (Debian 13 packages it);
   otherwise the bridge below, which runs the same CMake configure, build and
   install with the settings of pyproject.toml's [tool.scikit-build] and writes
   the wheel with the standard library (Debian 12 packages no scikit-build-core,
   and setuptools would add nothing but the zip: its bdist_wheel needs the
   separate `wheel` package there and writes build/ and *.egg-info into the
   source tree, whose build/ is `make build`'s).
   TORCHNECK_BUILD_BACKEND=bridge or =scikit-build-core chooses one.

Both build in a temporary folder unless `-C build-dir=DIR` is given (pip's
--config-settings), which keeps CMake's folder for the next build; only
`_torchneck` and `torchneck-analyze` are built (no tests, no fuzzers), and the
source tree is never written to.
"""

import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BACKEND_ENV = "TORCHNECK_BUILD_BACKEND"


class _Stop(SystemExit):
    """One line on stderr, exit status 1: the whole of a refused build's output."""

    def __init__(self, message):
        try:
            sys.stderr.write("torchneck: " + " ".join(str(message).split()) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        super().__init__(1)


def _say(message):
    """A progress line (pip shows it with -v)."""
    sys.stderr.write(f"torchneck: {message}\n")
    sys.stderr.flush()


# --- 1. torch ------------------------------------------------------------------
def _hidden_by_isolation():
    """True when this Python has torch once pip's isolated build environment
    (its PYTHONPATH overlay) is taken away."""
    if "PYTHONPATH" not in os.environ:
        return False
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
    try:
        probe = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                                "raise SystemExit(u.find_spec('torch') is None)"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def _require_torch():
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        if _hidden_by_isolation():
            raise _Stop(f"torch is installed for {sys.executable} but pip's build isolation hides it; "
                        "install with `pip install --no-build-isolation .`")
        raise _Stop(f"torch is not installed in this environment ({sys.executable}); torchneck is built "
                    "against the torch it will profile: install torch first, then "
                    "`pip install --no-build-isolation .`")
    try:
        import torch
    except Exception as e:  # a torch that is there but broken: its own first line says why
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise _Stop(f"torch is installed in this environment ({sys.executable}) but cannot be imported: "
                    f"{first}") from None
    _say(f"building against torch {torch.__version__} ({os.path.dirname(torch.__file__)})")


# --- 2. which build ------------------------------------------------------------
def _scikit_build_core():
    """scikit_build_core.build, or None for the bridge."""
    choice = os.environ.get(_BACKEND_ENV, "")
    if choice not in ("", "bridge", "scikit-build-core"):
        raise _Stop(f"{_BACKEND_ENV}={choice} is neither bridge nor scikit-build-core")
    if choice == "bridge":
        return None
    try:
        import scikit_build_core
        import scikit_build_core.build as skb
    except ImportError:
        if choice:
            raise _Stop(f"{_BACKEND_ENV}=scikit-build-core but {sys.executable} cannot import scikit_build_core") from None
        return None
    version = getattr(scikit_build_core, "__version__", "?")
    _say(f"building with scikit-build-core {version}")
    return skb


def _parallel():
    # scikit-build-core leaves the build serial with Makefiles (Debian 13 has no ninja).
    os.environ.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))


# --- PEP 517 hooks -------------------------------------------------------------
def get_requires_for_build_wheel(config_settings=None):
    _require_torch()
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _require_torch()
    skb = _scikit_build_core()
    _parallel()
    if skb is not None:
        return skb.build_wheel(wheel_directory, config_settings, metadata_directory)
    _say("building with the CMake bridge (no scikit-build-core here)")
    return _Bridge(config_settings or {}).build_wheel(wheel_directory)


def build_sdist(sdist_directory, config_settings=None):
    skb = _scikit_build_core()
    if skb is None:
        raise _Stop("a source distribution needs scikit-build-core, which this Python cannot import")
    return skb.build_sdist(sdist_directory, config_settings)


# --- the bridge: CMake, then a wheel written with zipfile ------------------------
def _load_toml(path):
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            from pip._vendor import tomli as tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


class _Bridge:
    def __init__(self, config_settings):
        self.pyproject = _load_toml(os.path.join(ROOT, "pyproject.toml"))
        self.project = self.pyproject["project"]
        self.skbuild = self.pyproject.get("tool", {}).get("scikit-build", {})
        self.build_dir = config_settings.get("build-dir") or None
        self.name = self.project["name"]
        self.version = self._version()

    def _version(self):
        if "version" in self.project:
            return self.project["version"]
        spec = self.skbuild["metadata"]["version"]
        with open(os.path.join(ROOT, spec["input"]), encoding="utf-8") as f:
            text = f.read()
        m = re.search(spec.get("regex", r"(?m)^__version__\s*=\s*['\"]v?(?P<value>[^'\"]+)['\"]"), text)
        if not m:
            raise _Stop(f"no version in {spec['input']}")
        return m.group("value")

    # CMake -------------------------------------------------------------------
    def _cmake(self, args):
        cmake = shutil.which("cmake")
        if cmake is None:
            raise _Stop("cmake is not on PATH; install CMake (Debian: apt-get install cmake)")
        r = subprocess.run([cmake, *args])
        if r.returncode != 0:
            raise _Stop(f"cmake {args[0]} {args[1] if len(args) > 1 else ''} failed (exit status {r.returncode}); "
                        "its output is above")

    def _compile(self, build_dir, stage):
        cm = self.skbuild.get("cmake", {})
        defines = [f"-D{k}={v}" for k, v in cm.get("define", {}).items()]
        try:  # a pip-installed pybind11 (scikit-build-core finds it by its entry point)
            import pybind11
            defines.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except (ImportError, AttributeError):
            pass  # Debian's pybind11-dev, found by find_package as it is
        self._cmake(["-S", ROOT, "-B", build_dir, f"-DPython_EXECUTABLE={sys.executable}",
                     f"-DCMAKE_BUILD_TYPE={cm.get('build-type', 'Release')}", *defines])
        targets = self.skbuild.get("build", {}).get("targets", [])
        self._cmake(["--build", build_dir, "--parallel", os.environ["CMAKE_BUILD_PARALLEL_LEVEL"],
                     *(["--target", *targets] if targets else [])])
        self._cmake(["--install", build_dir, "--prefix", stage])

    # the wheel ---------------------------------------------------------------
    def _tag(self):
        impl = sys.implementation.name
        if impl != "cpython":
            raise _Stop(f"the bridge builds for CPython only, not {impl}; install scikit-build-core")
        py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
        abi = py + getattr(sys, "abiflags", "")
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        return f"{py}-{abi}-{plat}"

    def _metadata(self):
        p = self.project
        lines = ["Metadata-Version: 2.1", f"Name: {self.name}", f"Version: {self.version}"]
        if "description" in p:
            lines.append(f"Summary: {p['description']}")
        if "requires-python" in p:
            lines.append(f"Requires-Python: {p['requires-python']}")
        lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
        body = ""
        readme = p.get("readme")
        if isinstance(readme, str):
            with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
                body = f.read()
            kind = "text/markdown" if readme.endswith(".md") else "text/plain"
            lines.append(f"Description-Content-Type: {kind}")
        return "\n".join(lines) + "\n\n" + body

    def _package_files(self, stage):
        """(path in the wheel, file) for every file: what CMake installed into
        STAGE, then the Python files of wheel.packages (never a stale
        _torchneck*.so or bytecode from the source tree)."""
        files = {}
        for dirpath, dirnames, filenames in os.walk(stage):
            for fn in filenames:
                full = os.path.join(dirpath, fn)
                files[os.path.relpath(full, stage).replace(os.sep, "/")] = full
        for src in self.skbuild.get("wheel", {}).get("packages", []):
            base = os.path.join(ROOT, src)
            pkg = os.path.basename(src.rstrip("/"))
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for fn in sorted(filenames):
                    if fn.endswith(".py") or fn == "py.typed":
                        full = os.path.join(dirpath, fn)
                        arc = pkg + "/" + os.path.relpath(full, base).replace(os.sep, "/")
                        files.setdefault(arc, full)
        return files

    def build_wheel(self, wheel_directory):
        tag = self._tag()
        own = None
        if self.build_dir is None:
            own = tempfile.mkdtemp(prefix="torchneck-build-")
            build_dir = os.path.join(own, "cmake")
        else:
            build_dir = os.path.abspath(self.build_dir)
        stage = tempfile.mkdtemp(prefix="torchneck-stage-")
        try:
            self._compile(build_dir, stage)
            files = self._package_files(stage)
            dist_info = f"{self.name}-{self.version}.dist-info"
            scripts = self.project.get("scripts", {})
            meta = {
                "METADATA": self._metadata(),
                "WHEEL": f"Wheel-Version: 1.0\nGenerator: torchneck_backend\nRoot-Is-Purelib: false\nTag: {tag}\n",
                "entry_points.txt": "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items()),
            }
            wheel_name = f"{self.name}-{self.version}-{tag}.whl"
            os.makedirs(wheel_directory, exist_ok=True)
            path = os.path.join(wheel_directory, wheel_name)
            record = io.StringIO()
            writer = csv.writer(record, lineterminator="\n")
            with zipfile.ZipFile(path + ".part", "w", zipfile.ZIP_DEFLATED) as z:
                def add(arc, data, mode=0o644):
                    info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
                    info.external_attr = (0o100000 | mode) << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    z.writestr(info, data)
                    writer.writerow([arc, _record_hash(data), len(data)])
                for arc in sorted(files):
                    with open(files[arc], "rb") as f:
                        data = f.read()
                    executable = os.stat(files[arc]).st_mode & 0o111
                    add(arc, data, 0o755 if executable else 0o644)
                for fn, text in meta.items():
                    add(f"{dist_info}/{fn}", text.encode("utf-8"))
                writer.writerow([f"{dist_info}/RECORD", "", ""])
                info = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = (0o100644) << 16
                z.writestr(info, record.getvalue(), zipfile.ZIP_DEFLATED)
            os.replace(path + ".part", path)
            return wheel_name
        finally:
            shutil.rmtree(stage, ignore_errors=True)
            if own:
                shutil.rmtree(own, ignore_errors=True)
