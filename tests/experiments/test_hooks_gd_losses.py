"""experiments/hooks/gd_losses.py: the gradient ratios of a run's curves, the zero baseline and the page's ratios."""

from __future__ import annotations

import math

import pytest

from tests.experiments._scripts import load_experiment

run, specs, harness = load_experiment("run"), load_experiment("spec"), load_experiment("harness")
hook = run.load_hook("gd_losses")


def _curves(start: float, end: float, unif_start: float, unif_end: float, steps=(0, 50, 100)) -> dict:
    n = len(steps)
    align = [start + (end - start) * i / (n - 1) for i in range(n)]
    unif = [unif_start + (unif_end - unif_start) * i / (n - 1) for i in range(n)]
    return {"steps": list(steps), "grad_alignment": align, "grad_uniformity": unif,
            "grad_total": [a + u for a, u in zip(align, unif, strict=True)]}


def test_gradient_summary_ratios_and_zero_gradients():
    metrics = hook.gradient_summary(_curves(2.0, 0.5, 1.0, 0.0))
    assert metrics["grad_alignment_start"] == 2.0 and metrics["grad_alignment_end"] == 0.5
    assert math.isclose(metrics["log_ratio_alignment"], math.log(0.25))
    assert math.isclose(metrics["log_ratio_alignment_vs_first"], math.log(0.5 / 1.25))
    assert math.isclose(metrics["log_ratio_uniformity"], math.log(hook.GRAD_FLOOR))  # 0 counts as the floor
    assert metrics["first_eval_step"] == 50
    assert hook.log_ratio(1.0, 0.0) is None and hook.log_ratio(None, 1.0) is None
    with pytest.raises(RuntimeError, match="not 0"):
        hook.gradient_summary(_curves(1.0, 1.0, 1.0, 1.0, steps=(50, 100, 150)))


def test_no_change_baseline_and_the_page_ratios(tmp_path):
    experiment = specs.load_spec("gd_losses")
    store = harness.RecordStore("gd_losses", tmp_path)
    timing = harness.RunTiming(wall_s=1.0)
    store.add("start", 0, {}, {"stsb_dev_spearman": 79.0, "shipped_stsb_dev_spearman": 86.0}, timing)
    for seed, factor in ((1, 0.1), (2, 0.2), (3, 0.4)):
        for loss, end in (("infonce", factor), ("dcl", 1.5)):
            store.add(loss, seed, {}, hook.gradient_summary(_curves(1.0, end, 1.0, end)), timing)
    values = run.values_reader(experiment, store)
    assert values("1×", "log_ratio_alignment") == {1: 0.0, 2: 0.0, 3: 0.0}
    assert values("start/mean", "stsb_dev_spearman") == {0: 86.0}
    found = {(t, b, d.metric): stats for d, stats, t, b in run.comparisons(experiment, store)}
    fade = found[("infonce", "1×", "log_ratio_alignment")]
    assert fade.n == 3 and fade.delta == pytest.approx(math.log(0.2))  # the geometric mean of 0.1, 0.2, 0.4
    args = run.build_parser(experiment).parse_args(["--results", str(tmp_path)])
    page = run.page_context(experiment, store, args)
    assert page["ratio"]("infonce", "1×", "log_ratio_alignment").startswith("×0.2 [")
    assert page["ratio"]("dcl", "infonce", "log_ratio_alignment").endswith("(n = 3)")
    assert page["ratio"]("hinged_dcl", "1×", "log_ratio_alignment") == "–"
    assert page["run_minutes"] > 0
