"""Detail windows (the default) against --detail=full on the real-loop
scripts (tests/python/scripts/loops/), as test_detail_windows.py does on the
bundled examples: each run against the script's own clock in that same run
(looptruth.py: perf_counter around its own code, rows cut where torchneck
cuts steps). The window run counts every step exactly, and its data share,
and each phase the script times itself (forward, backward, optimizer, and
eval_in_loop's evaluation; every shape times them), errs from the script's
clock by what the full run errs from its own, within 2 percentage points
(issue 17); an estimated phase also within what sampling its detailed
steps may err by in that run (conftest.window_sampling_pp), and on a run
that waited for CPUs by the stalls outside its windows (contention_stall_pp)."""

import pytest

from conftest import ESTIMATED_PHASES, contention_stall_pp, window_sampling_pp
from test_loops import run_loop, steady_rows

# The loop shapes, each with its default arguments (test_loops.py runs
# the same; growing_history's drift and grad_scaler's skipped steps are
# their own tests there).
SHAPES = ["uniform_clean", "grad_accum", "two_optimizers", "eval_in_loop", "checkpoint_every_k",
          "bursty_loader", "trainer_class", "lbfgs_closure", "grad_scaler", "growing_history"]
# Our phase for each of the script's own keys, where it times that phase.
PHASES = {"data": ("data_wait",), "forward": ("forward",), "backward": ("backward",), "optimizer": ("optimizer",)}
# growing_history times its penalty over the snapshots ("history": clones,
# subtractions and means outside any module call, before backward) apart
# from the model's forward; our forward phase holds both (operators outside
# module calls before backward are forward; steps.h), so its forward is
# compared with the script's two together. Against the script's forward
# alone it erred by -1.1 to +4.3 pp (beyond 2 pp in 6 of 16 runs), against
# the two -2.5 to +0.8 pp (1 of 16), on the same runs: the script's
# history share is 1.8 pp higher (mean; sd 1.2) next to its forward in the
# window run than in the full run (inferred, not measured: detail on every
# step slows the model's hooked module calls more than the penalty's small
# operators).
# grad_scaler's unscale and inf check are operators outside module calls,
# after backward: our forward phase, timed apart by the script. eval_in_loop
# times its validation passes, our evaluation phase.
SCRIPT_PHASES = {"growing_history": {"forward": ("forward", "history")},
                 "grad_scaler": {"forward": ("forward", "unscale_check")},
                 "eval_in_loop": {"evaluation": ("eval",)}}
TOLERANCE_PP = 2.0


def errors(profile, truth, shape):
    """Our share of each phase the script timed, minus the script's own
    share over the rows we call steady, in percentage points."""
    keep = steady_rows(truth, profile)
    per = truth["per_step_s"]
    total = sum(per["step"][i] for i in keep)
    phases = {**PHASES, **SCRIPT_PHASES.get(shape, {})}
    return {ours: profile["steps"]["breakdown_pct"][ours] - 100 * sum(per[k][i] for k in keys for i in keep) / total
            for ours, keys in phases.items() if all(k in per for k in keys)}


@pytest.mark.parametrize("shape", SHAPES)
def test_windowed_loop_figures_match_full_detail_against_the_scripts_clock(shape, tmp_path):
    full, full_truth = run_loop(shape, tmp_path / "full", tool_args=["--detail=full"])
    window, window_truth = run_loop(shape, tmp_path / "window", tool_args=["--detail=window"])
    assert full["steps"]["detail"] == "full" and window["steps"]["detail"] == "window"
    for p, truth in ((full, full_truth), (window, window_truth)):
        assert p["steps"]["count"] == truth["steps"], (shape, p["steps"]["count"], truth["steps"])
    e_full, e_window = errors(full, full_truth, shape), errors(window, window_truth, shape)
    assert {"data", "forward", "backward", "optimizer"} <= set(e_full), sorted(e_full)
    phases = {**PHASES, **SCRIPT_PHASES.get(shape, {})}
    keep = steady_rows(window_truth, window)
    for phase in e_full:
        allowed = TOLERANCE_PP
        if phase in ESTIMATED_PHASES:
            allowed += (window_sampling_pp(window, window_truth["per_step_s"], phases[phase], keep)
                        + contention_stall_pp(window, window_truth["per_step_s"], keep))
        assert abs(e_window[phase] - e_full[phase]) <= allowed, (
            f"{shape} {phase}: window {e_window[phase]:+.1f} pp from the script's clock, "
            f"full {e_full[phase]:+.1f} pp, allowed {allowed:.1f} pp")
