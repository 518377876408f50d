"""Names that would take over the user's terminal when the report is printed:
a function, a record_function scope, an nn.Module class and an argument
holding ESC[2J (clear the screen), an OSC sequence (ESC ] 0 ; title BEL:
retitle the terminal), the 8-bit CSI (U+009B) and a right-to-left override
(U+202E). The report on stderr, report.txt and `diff`'s report show each of
them escaped (\\x1b, \\x07, \\u009b, \\u202e), never raw; so do `diff`'s
one-line errors. A raw 0xff byte in the script's path or an argument is to
be shown as \\xff.
"""

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import TOOL, load_profile

CONTROLS = "\x1b[2J\x1b]0;pwned\x07\x9b2J\u202e"
FUNCTION = "busy" + CONTROLS + "fn"
SCOPE = "scope" + CONTROLS + "end"
CLASS = "Layer" + CONTROLS + "cls"
ARGUMENT = "arg" + CONTROLS + "txt"

HOSTILE_SCRIPT = textwrap.dedent('''
    import sys

    import torch
    from torch import nn

    FUNCTION, SCOPE, CLASS = {fn!r}, {scope!r}, {cls!r}


    def busy(x):
        s = 0
        for i in range(1000000):  # pure Python, enough samples to rank among the top 15 beside the imports
            s += i
        return x + 0 * s


    busy.__code__ = busy.__code__.replace(co_name=FUNCTION, co_qualname=FUNCTION)


    def forward(self, x):
        return busy(self.lin(x))


    net = type(CLASS, (nn.Module,), {{"forward": forward}})()
    net.lin = nn.Linear(64, 64)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    for step in range(8):
        opt.zero_grad()
        with torch.autograd.profiler.record_function(SCOPE):
            y = net(torch.randn(32, 64))
        y.sum().backward()
        opt.step()
    print("arguments", ascii(sys.argv[1:]))
''').format(fn=FUNCTION, scope=SCOPE, cls=CLASS)


def escaped(name):
    """NAME as the reports must show it: each control as its escape."""
    for raw, shown in (("\x1b", "\\x1b"), ("\x07", "\\x07"), ("\x9b", "\\u009b"), ("\u202e", "\\u202e")):
        name = name.replace(raw, shown)
    return name


def assert_nothing_raw(text, where):
    """TEXT (bytes) holds no terminal control but '\\n', no C1 control, no
    bidi override and no byte that is not UTF-8."""
    decoded = text.decode("utf-8", "surrogateescape")
    bad = sorted({c for c in decoded if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f
                  or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069" or 0xdc80 <= ord(c) <= 0xdcff})
    assert not bad, f"{where} holds raw {[hex(ord(c)) for c in bad]}"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    path = base / "train.py"
    path.write_text(HOSTILE_SCRIPT)
    out = str(base / "out")
    r = subprocess.run([TOOL, "run", "-o", out, str(path), "--tag", ARGUMENT], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")[-3000:]
    assert ascii(["--tag", ARGUMENT]) in r.stdout.decode(), r.stdout  # the script got its argument
    return base, out, r


def test_the_printed_report_shows_control_characters_escaped(hostile_run):
    _, out, r = hostile_run
    assert_nothing_raw(r.stderr, "the report on stderr")
    report = r.stderr.decode()
    for name in (FUNCTION, SCOPE, CLASS):
        assert escaped(name) in report, (escaped(name), report[-4000:])
    # The names are in the profile as they were: only the report's text escapes them.
    profile = load_profile(out)
    assert profile["run"]["argv"][-1] == ARGUMENT
    assert any(f["function"] == FUNCTION for f in profile["python"]), profile["python"][:5]


def test_report_txt_shows_control_characters_escaped(hostile_run):
    _, out, _ = hostile_run
    text = (Path(out) / "report.txt").read_bytes()
    assert_nothing_raw(text, "report.txt")
    for name in (FUNCTION, SCOPE, CLASS):
        assert escaped(name) in text.decode(), escaped(name)


def test_diff_shows_control_characters_escaped(hostile_run):
    base, out, _ = hostile_run
    d = str(base / "diff")
    r = subprocess.run([TOOL, "diff", "-o", d, "--top", "1000", out, out], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = (Path(d) / "diff.txt").read_bytes()
    for what, data in (("diff's stdout", r.stdout), ("diff.txt", text)):
        assert_nothing_raw(data, what)
        # Python functions are named file(function), scopes by their name.
        for name in (FUNCTION, SCOPE):
            assert escaped(name) in data.decode(), (what, escaped(name))


def test_a_diff_error_shows_a_hostile_path_escaped(tmp_path):
    missing = str(tmp_path / ("run" + CONTROLS))
    r = subprocess.run([TOOL, "diff", "-o", str(tmp_path / "d"), missing, missing], capture_output=True, timeout=60)
    assert r.returncode == 2
    assert_nothing_raw(r.stderr, "diff's error")
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchneck: ") and escaped(missing) in lines[0], lines


def test_a_raw_byte_in_the_path_and_an_argument_is_shown_escaped(tmp_path):
    # Bytes that are not UTF-8 in a folder name and an argument: the script
    # runs as under plain Python, the report shows the byte as \xff.
    folder = os.path.join(os.fsencode(str(tmp_path)), b"dir\xff")
    os.mkdir(folder)
    path = os.path.join(folder, b"train.py")
    with open(path, "w") as f:
        f.write(HOSTILE_SCRIPT)
    out = str(tmp_path / "out")
    r = subprocess.run([TOOL, "run", "-o", out, path, b"raw\xff"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")[-3000:]
    assert ascii(["raw\udcff"]) in r.stdout.decode(), r.stdout
    report_txt = (tmp_path / "out" / "report.txt").read_bytes()
    for what, data in (("the report on stderr", r.stderr), ("report.txt", report_txt)):
        assert_nothing_raw(data, what)
        assert str(tmp_path / "dir\\xff" / "train.py") in data.decode(), (what, data[-3000:])
