"""Ranks started by torch.multiprocessing.spawn, as pytorch/examples'
imagenet starts them (spawn_train.py: init_process_group with init_method,
world_size and rank; no RANK/WORLD_SIZE in the environment), under a plain
`torchneck run SCRIPT`: every rank profiled into DIR/rank-K, K its rank in
the process group, the ranks merged into DIR when spawn returns, the
launching process's own report in DIR/launcher. Figures against what each
rank measures itself in the same run (--truth, perf_counter), as in
test_distributed.py."""

import os
import statistics
import subprocess

import pytest

from conftest import PYTHON, TOOL, load_profile, script
from test_distributed import DELAY_MS, ENV, EXCESS_TOLERANCE, check_ranks_against_truth, free_port, ids, waited_beyond

SPAWN = script(os.path.join("dist", "spawn_train.py"))


def spawn_run(tmp_path, *args, name="out"):
    out = str(tmp_path / name)
    r = subprocess.run([TOOL, "run", "-o", out, SPAWN, *args], env=ENV, capture_output=True, text=True,
                       timeout=300)
    return out, r


def rank_folders(out):
    return sorted(n for n in os.listdir(out) if n.startswith(("rank-", "spawn-")))


def test_spawned_ranks_are_profiled_under_their_process_group_rank(tmp_path):
    # Process i is rank 1-i: the folder and the verdict follow the process
    # group's rank, not the spawn index (--slow-rank is a rank: process 0).
    truth = str(tmp_path / "truth")
    out, r = spawn_run(tmp_path, "--mode", "slow_loader", "--delay-ms", str(DELAY_MS), "--reverse-ranks",
                       "--truth", truth)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "spawn returned" in r.stdout
    assert rank_folders(out) == ["rank-0", "rank-1"]  # nothing left under its provisional name
    for k in (0, 1):
        assert os.path.isdir(os.path.join(out, f"rank-{k}")) and not os.path.islink(os.path.join(out, f"rank-{k}"))
        assert os.path.exists(os.path.join(out, f"rank-{k}", "report.txt"))
    prof = load_profile(out)
    assert len(prof["ranks"]) == 2
    t, steps = check_ranks_against_truth(prof, truth, out)
    f = ids(prof).get("straggler")
    assert f is not None, [x["id"] for x in prof["findings"]]
    assert f["rank"] == 1 and f["cause"] == "input", f
    beyond = waited_beyond(t, steps)  # over the run: see test_distributed
    assert f["excess_ms"] == pytest.approx(statistics.mean(beyond), rel=EXCESS_TOLERANCE), (f, beyond)
    assert "VERDICT: Rank 1 holds the others back" in r.stderr
    # The launching process's own report, apart; DIR is the job's folder,
    # which `torchneck report` merges again.
    assert load_profile(os.path.join(out, "launcher"))["run"]["exit_code"] == 0
    assert not os.path.exists(os.path.join(out, "profile.spill"))
    again = subprocess.run([TOOL, "report", out], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert [x["step_ms"] for x in load_profile(out)["ranks"]] == [x["step_ms"] for x in prof["ranks"]]


def test_a_failing_spawned_rank_leaves_every_report(tmp_path):
    out, r = spawn_run(tmp_path, "--mode", "crash")
    plain = subprocess.run([PYTHON, SPAWN, "--mode", "crash"], env=ENV, capture_output=True, text=True,
                           timeout=300)
    assert r.returncode == plain.returncode != 0
    # spawn's own account of the failure, as plain Python shows it
    assert "ProcessRaisedException" in r.stderr and "RuntimeError: rank 1 fails at step 8" in r.stderr
    assert "spawn returned" not in r.stdout
    prof = load_profile(out)
    assert prof["first_failure"]["rank"] == 1
    endings = {x["rank"]: x["ending"] for x in prof["ranks"]}
    assert endings[1] == "exception", endings
    assert set(endings) == {0, 1}
    for k in (0, 1):
        assert os.path.exists(os.path.join(out, f"rank-{k}", "report.txt"))
    assert "FAILED: rank 1 failed first" in r.stderr


def test_a_spawned_rank_killed_by_sigkill_leaves_its_last_spill(tmp_path):
    # As the out-of-memory killer ends a rank: no Python runs after it. Its
    # last spill is merged and reported; the rank that spawn then terminates
    # writes its report. It dies 1 s into its loop, by its own clock (a
    # fixed step count took under 1 s on a fast machine): before the second
    # scheduled spill (3 s after its start), and the first (1 s) comes before
    # it joins its process group, so what names it a rank is the spill
    # made when it joins (runner.py: a rank killed 2.5 s in, under load,
    # once left no such spill).
    args = ["--mode", "kill", "--kill-after-s", "1", "--steps", "1000000"]
    out, r = spawn_run(tmp_path, *args)
    plain = subprocess.run([PYTHON, SPAWN, *args], env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == plain.returncode != 0
    assert "terminated with signal SIGKILL" in r.stderr
    assert rank_folders(out) == ["rank-0", "rank-1"]
    assert not os.path.islink(os.path.join(out, "rank-1"))
    prof = load_profile(out)
    endings = {x["rank"]: x["ending"] for x in prof["ranks"]}
    assert endings[1] == "still running" and endings[0] in ("SIGTERM", "exception"), endings
    assert prof["first_failure"]["rank"] == 1
    assert "FAILED: rank 1 failed first: killed with no report" in r.stderr
    assert os.path.exists(os.path.join(out, "rank-1", "report.txt"))  # from its last spill


def test_ranks_the_script_joins_itself_are_merged_when_joined(tmp_path):
    out, r = spawn_run(tmp_path, "--no-join", "--steps", "6")
    assert r.returncode == 0, r.stderr[-3000:]
    assert rank_folders(out) == ["rank-0", "rank-1"]
    assert [x["rank"] for x in load_profile(out)["ranks"]] == [0, 1]
    assert os.path.exists(os.path.join(out, "launcher", "report.txt"))


def detailed_steps(out):
    return [s["detailed"] for s in load_profile(out)["steps"]["per_step"]]


def test_ranks_that_learn_their_rank_when_they_join_detail_the_same_steps(tmp_path):
    # GIVEN two ranks each started by hand, plain `torchneck run`, with no
    # RANK/WORLD_SIZE: they learn they are ranks in init_process_group
    url = f"tcp://127.0.0.1:{free_port()}"
    outs = [str(tmp_path / f"r{r}") for r in (0, 1)]
    procs = [subprocess.Popen([TOOL, "run", "-o", outs[r], SPAWN, "--as-rank", str(r), "--dist-url", url,
                               "--steps", "215"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in (0, 1)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-3000:] for _, e in results]
    # THEN their detail windows are on the same steps, a rank's fixed
    # schedule (docs/overhead.md): the first window (set-up, warm-up and 5
    # steps), then 6 steps from the 200th, whatever each measured the
    # detail to cost
    d = [detailed_steps(o) for o in outs]
    assert len(d[0]) == len(d[1]) == 215
    assert d[0] == d[1]
    assert [k for k, on in enumerate(d[0]) if on] == list(range(7)) + list(range(200, 206))
    assert all(load_profile(o)["steps"]["detail"] == "window" for o in outs)


def test_forked_ranks_are_not_profiled_and_it_says_why(tmp_path):
    out, r = spawn_run(tmp_path, "--start-method", "fork", "--steps", "3")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [x for x in r.stderr.splitlines() if "not profiled" in x]
    assert len(lines) == 1 and "start_method='fork'" in lines[0], r.stderr[-3000:]
    assert rank_folders(out) == []
    assert load_profile(out)["run"]["exit_code"] == 0  # the launching process's report, as for any script

