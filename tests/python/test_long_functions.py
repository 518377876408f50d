"""Functions short enough to read: none over 120 lines in C++ (src/) or 100
in Python (python/torchneck/), as scripts/long-functions counts them."""

import importlib.machinery
import importlib.util
import os

import pytest

from conftest import ROOT

pytestmark = pytest.mark.native_only


def _checker():
    path = os.path.join(ROOT, "scripts", "long-functions")
    loader = importlib.machinery.SourceFileLoader("long_functions", path)
    spec = importlib.util.spec_from_loader("long_functions", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_no_function_is_over_the_limits():
    found = _checker().long_functions(ROOT)
    assert found == [], "\n".join(f"{p}:{line}: {n} lines: {name}" for n, p, line, name in found)


def _cpp_function(name, body_lines):
    # Braces in strings, comments and a lambda inside do not end it.
    body = ["  auto f = [] { return 1; };", '  const char* s = "}";  // }'] + ["  ++x;"] * (body_lines - 2)
    return [f"int {name}(int x) {{"] + body + ["  return x;", "}"]


def test_the_check_finds_what_is_over_and_only_that(tmp_path):
    src = tmp_path / "src" / "analyze"
    src.mkdir(parents=True)
    lines = ["#include <string>", "namespace torchneck {", "namespace {", "struct S {", "  int a;", "};",
             "}  // namespace"]
    lines += _cpp_function("long_one", 120)  # 123 lines with its header and closing lines
    lines += _cpp_function("short_one", 117)  # 120 lines: at the limit
    lines += ["class C {", " public:"] + ["  " + l for l in _cpp_function("method", 130)] + ["};"]
    lines += ["}  // namespace torchneck"]
    (src / "x.cc").write_text("\n".join(lines) + "\n")
    py = tmp_path / "python" / "torchneck"
    py.mkdir(parents=True)
    (py / "m.py").write_text("def long_one():\n" + "    x = 1\n" * 100 + "\n\ndef short_one():\n" +
                             "    x = 1\n" * 99)
    found = {(path, name.split("(")[0].split()[-1], n) for n, path, _, name in _checker().long_functions(str(tmp_path))}
    assert found == {(os.path.join("src", "analyze", "x.cc"), "long_one", 123),
                     (os.path.join("src", "analyze", "x.cc"), "method", 133),
                     (os.path.join("python", "torchneck", "m.py"), "long_one", 101)}
