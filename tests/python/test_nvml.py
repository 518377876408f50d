"""The GPUs over the run from NVML, end to end: `./torchneck run` with the
stand-in NVML library the C++ build makes (tests/cpp/nvml_standin.cc),
loaded through TORCHNECK_NVML_LIBRARY and scripted by the test, so that
profile.json's series can be compared with the readings the script set;
and, without it on this GPU-less machine, no trace of a GPU at all."""

import ctypes
import os

import pytest

from conftest import ROOT, load_profile, run_tool, script
from test_report_html import assert_clean_page, open_in_browser

STANDIN = os.path.join(ROOT, "build", "libtorchneck_nvml_standin.so")

# GPU 0's readings of its samples 0, 1, 2 (the last repeats): gpu %, memory
# %, used bytes, SM MHz, power mW.
GPU0 = [(10, 5, 1_000_000_000, 1980, 100_000),
        (20, 6, 2_000_000_000, 1970, 200_000),
        (30, 7, 3_000_000_000, 1500, 300_000)]
SCRIPT = "".join(
    ["device Stand-in_A GPU-aaaa-1111 150000000000\n",
     "device Stand-in_B GPU-bbbb-2222 80000000000\n"]
    + [f"values 0 {' '.join(map(str, v))}\n" for v in GPU0]
    + ["values 1 90 50 70000000000 1410 650000\n",
       "fail 0 power 1\n",   # GPU 0's power call fails in its sample 1
       "lost 1 2\n"])        # GPU 1 falls off the bus at its sample 2


def run_with(tmp_path, env_extra, *args):
    out = str(tmp_path / "out")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCHNECK_NVML_LIBRARY", "TORCHNECK_NVML_STANDIN_SCRIPT", "CUDA_VISIBLE_DEVICES")}
    env.update(env_extra)
    r = run_tool(["-o", out, *args, script("nvml_steps.py")], env=env)
    assert r.returncode == 0, r.stderr
    return load_profile(out), r.stderr


def scripted(tmp_path, text):
    if not os.path.exists(STANDIN):
        pytest.fail(f"{STANDIN} is not built (make build)")
    path = tmp_path / "nvml_script.txt"
    path.write_text(text)
    return {"TORCHNECK_NVML_LIBRARY": STANDIN, "TORCHNECK_NVML_STANDIN_SCRIPT": str(path)}


def test_series_are_the_scripted_readings(tmp_path):
    profile, report = run_with(tmp_path, scripted(tmp_path, SCRIPT), "--nvml-interval-ms=20")
    nv = profile["nvml"]
    assert nv["sampled"] and nv["interval_ms"] == 20.0
    d0, d1 = nv["devices"]
    assert (d0["name"], d0["uuid"], d0["memory_total_bytes"]) == ("Stand-in A", "GPU-aaaa-1111", 150_000_000_000)
    # Sample k of GPU 0 has the script's k-th readings, power null in sample 1.
    series = d0["series"]
    assert len(series) >= 10, series  # a run of about a second at 20 ms
    for k, row in enumerate(series):
        want = list(GPU0[min(k, 2)])
        if k == 1:
            want[4] = None
        assert row[1:] == want, (k, row)
    times = [row[0] for row in series]
    assert times == sorted(times) and times[-1] - times[0] > 500, times
    # GPU 1 keeps its two samples, and a note says when it disappeared.
    assert [row[1:] for row in d1["series"]] == [[90, 50, 70_000_000_000, 1410, 650_000]] * 2
    assert d1["lost_ms"] is not None and d1["lost_ms"] >= d1["series"][-1][0]
    assert any(n.startswith("NVML: GPU 1 (Stand-in B) disappeared") for n in profile["notes"]), profile["notes"]
    # The summary and the terminal line agree with the readings.
    assert d0["gpu_util_peak_pct"] == 30 and d0["sm_clock_min_mhz"] == 1500 and d0["sm_clock_max_mhz"] == 1980
    assert d0["memory_used_peak_bytes"] == 3_000_000_000
    assert "GPU 0 (Stand-in A): utilisation mean " in report, report
    assert "GPU 1 (Stand-in B): utilisation mean 90 %" in report and "lost during the run" in report, report


def test_report_html_draws_each_gpu_with_a_gap_where_nvml_read_nothing(tmp_path):
    # GIVEN GPU 1's utilisation call failing in its sample 3
    env = scripted(tmp_path, SCRIPT.replace("lost 1 2\n", "fail 1 utilization 3\n"))
    profile, _ = run_with(tmp_path, env, "--nvml-interval-ms=20")
    obs = open_in_browser(os.path.join(str(tmp_path / "out"), "report.html"), str(tmp_path / "shots"))
    assert_clean_page(obs)
    # THEN the NVML section shows one line per GPU, with its name and mean
    assert obs["nvmlSectionVisible"]
    d0, d1 = profile["nvml"]["devices"]
    assert len(obs["nvmlLines"]) == 2
    assert obs["nvmlLines"][0].startswith("GPU 0 (Stand-in A) \u00b7 utilisation mean %.0f %%" % d0["gpu_util_mean_pct"])
    assert obs["nvmlLines"][1].startswith("GPU 1 (Stand-in B) \u00b7 utilisation mean 90 %")
    # AND each chart has a point per sample, GPU 1's utilisation broken in two
    # around the sample NVML could not read
    paths = {(p["chart"], p["series"].split()[0]): p for p in obs["nvmlSeries"]}
    assert paths[("chart-nvml-0", "utilisation")]["points"] == len(d0["series"])
    assert paths[("chart-nvml-0", "utilisation")]["moves"] == 1
    assert paths[("chart-nvml-0", "memory")]["points"] == len(d0["series"])
    assert d1["series"][3][1] is None
    assert paths[("chart-nvml-1", "utilisation")]["points"] == len(d1["series"]) - 1
    assert paths[("chart-nvml-1", "utilisation")]["moves"] == 2
    charts = {c["id"]: c for c in obs["charts"]}
    assert charts["chart-nvml-0"]["drawn"] > 0 and charts["chart-nvml-0"]["empty"] is None


def test_no_driver_is_a_note_and_the_run_stands(tmp_path):
    profile, report = run_with(tmp_path, scripted(tmp_path, "init 9\n" + SCRIPT))
    assert not profile["nvml"]["sampled"] and profile["nvml"]["devices"] == []
    assert any("nvmlInit_v2 failed: Driver Not Loaded (9)" in n for n in profile["notes"]), profile["notes"]
    assert profile["steps"]["count"] >= 40
    assert "GPU 0 (" not in report


def test_nvml_interval_zero_turns_it_off(tmp_path):
    profile, report = run_with(tmp_path, scripted(tmp_path, SCRIPT), "--nvml-interval-ms=0")
    assert not profile["nvml"]["sampled"] and profile["nvml"]["devices"] == []
    assert "GPU 0 (" not in report


def _nvml_on_this_machine():
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(_nvml_on_this_machine(), reason="this machine has NVML: the CPU-only case is not testable here")
def test_without_nvml_the_report_has_no_gpu_and_no_note(tmp_path):
    profile, report = run_with(tmp_path, {})
    assert not profile["nvml"]["sampled"] and profile["nvml"]["devices"] == []
    assert not any("NVML" in n for n in profile["notes"]), profile["notes"]
    assert "GPU 0 (" not in report and "NVML" not in report, report


def test_gpu_off_turns_nvml_off_too(tmp_path):
    # GIVEN a working (stand-in) NVML, WHEN the run says --gpu=off
    profile, report = run_with(tmp_path, scripted(tmp_path, SCRIPT), "--gpu=off", "--nvml-interval-ms=20")
    # THEN no GPU is sampled, and the report says why in its one GPU line
    assert not profile["nvml"]["sampled"], profile["nvml"]
    assert "GPU: not collected (--gpu=off)" in report
    assert "Stand-in A" not in report
