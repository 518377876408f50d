"""A damaged profile.spill is never read silently: `torchneck report` refuses
it in one line (exit 2) or gives the undamaged spill's profile.json, never
other numbers, a traceback or a hang. The random trials are
fuzz/spill_bytes.py's; TORCHNECK_SPILL_DAMAGE_COUNT sets how many and
TORCHNECK_SPILL_DAMAGE_SEED their seed (`python fuzz/spill_bytes.py --count
200` prints the tally of more)."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TOOL

sys.path.insert(0, os.path.join(ROOT, "fuzz"))
import spill_bytes  # noqa: E402

COUNT = int(os.environ.get("TORCHNECK_SPILL_DAMAGE_COUNT", "40"))
SEED = int(os.environ.get("TORCHNECK_SPILL_DAMAGE_SEED", "7"))


@pytest.fixture(scope="module")
def spill(tmp_path_factory):
    """A small training run's profile.spill and `torchneck report`'s
    profile.json of it, undamaged."""
    work = str(tmp_path_factory.mktemp("spill"))
    with open(os.path.join(spill_bytes.make_run(work), "profile.spill"), "rb") as f:
        data = f.read()
    r, reference = spill_bytes.report(data, os.path.join(work, "undamaged"))
    assert r.returncode == 0, r.stderr
    return data, reference


def one_line_refusal(r):
    lines = r.stderr.splitlines()
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and lines[0].startswith("torchneck: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0][len("torchneck: "):]


def with_bytes_replaced(data, old, new):
    at = data.find(old)
    assert at >= 0 and len(new) == len(old), old
    return data[:at] + new + data[at + len(old):]


def test_a_damaged_byte_is_refused_or_changes_nothing(spill, tmp_path):
    # GIVEN copies of a spill, each with one byte changed at a random position
    data, reference = spill
    # WHEN each is reported THEN it is refused in one line, or its
    # profile.json is the undamaged one's
    failures = [f"byte {at} {old:#04x} -> {new:#04x}: {what}"
                for at, old, new, what in spill_bytes.trials(data, reference, str(tmp_path), COUNT, seed=SEED)
                if what not in ("refused", "identical")]
    assert not failures, "\n".join(failures)


def test_a_name_that_is_not_utf8_is_refused_in_one_line(spill, tmp_path):
    # GIVEN an operator's name with a byte that is not UTF-8 (as a str for
    # Python it was a UnicodeDecodeError traceback)
    data, _ = spill
    damaged = with_bytes_replaced(data, b"aten::addmm", b"aten::\xffddmm")
    # THEN the report names the file, the byte and the section
    message = one_line_refusal(spill_bytes.report(damaged, str(tmp_path / "name"))[0])
    assert "profile.spill: byte " in message and "section 'ops' is damaged" in message, message


def test_a_stored_enum_that_is_not_utf8_is_refused_with_a_message(spill, tmp_path):
    # GIVEN the Python mode's stored string with a byte that is not UTF-8 (its
    # error message was not UTF-8 either, and came out as "torchneck: ")
    data, _ = spill
    damaged = with_bytes_replaced(data, b"sample", b"s\xffmple")
    message = one_line_refusal(spill_bytes.report(damaged, str(tmp_path / "mode"))[0])
    assert "profile.spill: byte " in message and "section 'run' is damaged" in message, message


def test_a_fifo_as_the_spill_is_refused_without_waiting_for_a_writer(tmp_path):
    # GIVEN a folder whose profile.spill is a FIFO nobody writes to
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "profile.spill")
    # WHEN it is reported THEN it is refused at once (before, the read waited
    # for a writer forever; the timeout only keeps a regression from hanging)
    r = subprocess.run([TOOL, "report", str(out)], capture_output=True, text=True, timeout=120)
    message = one_line_refusal(r)
    assert message.endswith("profile.spill: not a regular file (a FIFO)"), message


def test_a_folder_whose_name_is_not_utf8_is_reported(spill, tmp_path):
    # GIVEN a run's spill in a folder whose name is not UTF-8
    data, reference = spill
    out = os.path.join(os.fsencode(tmp_path), b"out\xff")
    os.makedirs(out)
    with open(os.path.join(out, b"profile.spill"), "wb") as f:
        f.write(data)
    # WHEN it is reported THEN it is read as from any folder (before: a
    # TypeError traceback)
    r = subprocess.run([os.fsencode(TOOL), b"report", out], capture_output=True, timeout=120)
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr.decode(errors="replace")
    with open(os.path.join(out, b"profile.json")) as f:
        assert json.load(f) == reference


def test_an_error_naming_a_folder_that_is_not_utf8_has_its_message(tmp_path):
    # GIVEN a FIFO as the spill, in a folder whose name is not UTF-8: the
    # error names the folder (a message that is not UTF-8 reached Python as
    # a RuntimeError with no message at all)
    out = os.path.join(os.fsencode(tmp_path), b"out\xff")
    os.makedirs(out)
    os.mkfifo(os.path.join(out, b"profile.spill"))
    r = subprocess.run([os.fsencode(TOOL), b"report", out], capture_output=True, text=True, errors="replace",
                       timeout=120)
    message = one_line_refusal(r)
    assert message.endswith("/out\\xff/profile.spill: not a regular file (a FIFO)"), message
