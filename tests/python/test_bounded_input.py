"""`torchneck analyze` on input that would never end or never fit (issue 38):
a 1 GiB gzip bomb, /dev/zero, a FIFO and a trace over --max-trace-size are
each refused with one line and exit status 2, in bounded memory (the peak
resident memory of the process, from the kernel's own count), without a
hang, and with no output folder left behind."""

import json
import os
import subprocess
import sys
import zlib

import pytest

from conftest import ROOT, TOOL

pytestmark = pytest.mark.native_only

FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures", "kineto")
SMALL = os.path.join(FIXTURES, "a100_event_sync.trace.json.gz")

# The peak resident memory allowed: the bound, a small fraction of the
# 1 GiB the bomb gunzips to.
PEAK_RSS_MB = 400
# Address space for the tool: a regression that reads on fails here instead of
# taking the machine's memory.
ADDRESS_SPACE = 4 << 30

# Runs argv[1:] under the address-space limit argv[0]; prints its exit status,
# output and peak resident memory (the kernel's ru_maxrss of this one child) as JSON.
_MEASURED = """
import json, resource, subprocess, sys
limit = int(sys.argv[1])
def bounded():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    r = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=120, preexec_fn=bounded,
                       stdin=subprocess.DEVNULL)
    rc, out, err = r.returncode, r.stdout, r.stderr
except subprocess.TimeoutExpired as e:
    rc, out, err = "timeout", "", str(e)
rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": rc, "stdout": out, "stderr": err, "peak_rss_mb": rss_kb / 1024}))
"""


def analyze_measured(args, cwd):
    r = subprocess.run([sys.executable, "-c", _MEASURED, str(ADDRESS_SPACE), TOOL, "analyze", *args],
                       capture_output=True, text=True, timeout=180, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def gzip_filled(path, head, fill, size):
    """A one-member gzip of HEAD then FILL bytes up to SIZE, written in a
    second or two: zlib compresses the first MiB, then one MiB of FILL after
    a full flush (which resets its state, so that every further MiB
    compresses to the same bytes), repeated; the trailer is written here."""
    mib = 1 << 20
    first = head + fill * (mib - len(head))
    more = fill * mib
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    opening = c.compress(first) + c.flush(zlib.Z_FULL_FLUSH)
    repeated = c.compress(more) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(more) + c.flush(zlib.Z_FULL_FLUSH) == repeated
    final = c.flush(zlib.Z_FINISH)[:-8]  # the last, empty block, without zlib's trailer
    crc = zlib.crc32(first)
    for _ in range(size // mib - 1):
        crc = zlib.crc32(more, crc)
    with open(path, "wb") as f:
        f.write(opening)
        for _ in range(size // mib - 1):
            f.write(repeated)
        f.write(final + crc.to_bytes(4, "little") + (size % (1 << 32)).to_bytes(4, "little"))


def gunzipped_size(path):
    """The size of PATH gunzipped by Python's zlib, in pieces (the oracle)."""
    d, n = zlib.decompressobj(31), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 16):
            while chunk:
                n += len(d.decompress(chunk, 64 << 20))
                chunk = d.unconsumed_tail
    assert d.eof and not d.unused_data
    return n


def assert_refused(r, line, out):
    assert r["rc"] == 2, r
    assert r["stderr"] == f"torchneck: {line}\n", r
    assert not os.path.exists(out)
    assert r["peak_rss_mb"] < PEAK_RSS_MB, r


@pytest.mark.parametrize("head,fill,refusal", [
    (b"", b"\0", "byte 0: not a JSON trace (starts with 0x00)"),
    (b"{", b" ", "gunzips to over 200 times its size"),  # a JSON start: the ratio stops it
], ids=["zeros", "brace_then_blanks"])
def test_a_gzip_bomb_is_refused_early(tmp_path, head, fill, refusal):
    bomb = str(tmp_path / "bomb.json.gz")
    gzip_filled(bomb, head, fill, 1 << 30)
    assert gunzipped_size(bomb) == 1 << 30 and os.path.getsize(bomb) < 2 << 20
    out = str(tmp_path / "out")
    r = analyze_measured(["-o", out, bomb], str(tmp_path))
    assert r["rc"] == 2, r
    assert r["stderr"].startswith(f"torchneck: {bomb}: {refusal}") and r["stderr"].count("\n") == 1, r
    assert not os.path.exists(out)
    assert r["peak_rss_mb"] < PEAK_RSS_MB, r


def test_dev_zero_is_refused(tmp_path):
    out = str(tmp_path / "out")
    r = analyze_measured(["-o", out, "/dev/zero"], str(tmp_path))
    assert_refused(r, "/dev/zero: not a regular file (a character device)", out)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = str(tmp_path / "trace.json")
    os.mkfifo(fifo)
    out = str(tmp_path / "out")
    r = analyze_measured(["-o", out, fifo], str(tmp_path))
    assert_refused(r, f"{fifo}: not a regular file (a FIFO)", out)


def test_max_trace_size_refuses_a_larger_trace_and_reads_a_smaller_one(tmp_path):
    with open(SMALL, "rb") as f:
        size = len(zlib.decompress(f.read(), 31))
    out = str(tmp_path / "out")
    r = analyze_measured([f"--max-trace-size={size - 1}", "-o", out, SMALL], str(tmp_path))
    assert r["rc"] == 2, r
    line = r["stderr"]
    assert line.startswith(f"torchneck: {SMALL}: the trace is larger than ") and line.count("\n") == 1, r
    assert "--max-trace-size=SIZE raises it" in line
    assert not os.path.exists(out)
    r = analyze_measured(["--max-trace-size", str(size), "-o", out, SMALL], str(tmp_path))
    assert r["rc"] == 0, r
    assert os.path.isfile(os.path.join(out, "profile.json"))
