"""experiments/hooks/reclaim.py: the per-step time of a run's log, the plain arm's config, and the overhead
figures read from BENCHMARKS.md's bench/reclaim_overhead.py blocks (no training)."""

from __future__ import annotations

import pytest

from tests.experiments._scripts import load_experiment

run, specs, harness = load_experiment("run"), load_experiment("spec"), load_experiment("harness")
hook = run.load_hook("reclaim")


def test_step_sizes_timing_and_the_loss_at_the_end():
    assert hook.step_sizes(40, 32, 6) == [32, 8, 32, 8, 32, 8]
    rates = [1.0, 16.0, 8.0, 16.0, 8.0, 16.0]  # step 1 slow (loader start); full steps 2 s, partial 0.5 s
    log = [{"step": s, "samples_per_s": r, "loss/ans": 3.0} for s, r in enumerate(rates, start=1)]
    got = hook.timing(log, 40)
    assert got["steps"] == 6 and got["train_s"] == pytest.approx(32 + 0.5 + 4 + 0.5 + 4 + 0.5)
    assert got["step_ms"] == pytest.approx(4000.0)  # full batches after step 1: steps 3 and 5
    assert hook.loss_at_end(log, "loss/ans") == pytest.approx(3.0) and hook.loss_at_end(log, "loss/ce") is None


def test_the_plain_arm_trains_like_the_reclaim_arm(tmp_path):
    """scl at λ = 0 with its implied head and reclaim agree on every train / data / eval key and the head."""
    from contrastext import load_config, recipe_path
    from contrastext.runs.reclaim import ReclaimArgs
    from contrastext.runs.scl import SCLArgs

    experiment = specs.load_spec("reclaim")
    runs = {(r.name, r.seed): r for r in run.plan(experiment, run.build_parser(experiment).parse_args(
        ["--runs", str(tmp_path)]))}
    for task in ("sst2", "mrpc", "rte"):
        plain, top = runs[(f"{task}/plain", 2)], runs[(f"{task}/top100", 2)]
        a = load_config(recipe_path(plain.recipe), plain.overrides[1:])
        b = load_config(recipe_path(top.recipe), top.overrides[1:])
        left, right = a.model_dump(), b.model_dump()
        right["data"]["few_shot_sampling"] = right["data"]["few_shot_sampling"] or "per_class"  # reclaim's own draw
        for section in ("train", "data", "eval"):
            assert left[section] == right[section], section
        p, t = a.method_args_as(SCLArgs), b.method_args_as(ReclaimArgs)
        assert (p.lam, p.head, p.pooling, p.head_dropout) == (0, "linear", t.pooling, t.head_dropout)


BLOCK = """<!-- begin bench/reclaim_overhead.py{suffix} -->
- date: 2026-01-02 03:00 UTC; machine: x86_64
- step = ... K = 100; median of 20 steps

| bank rows | negatives | search | ms/step | time vs baseline | peak MiB | + MiB |
|---:|---|---|---:|---:|---:|---:|
| 10 | baseline | – | 100.0 | 1 (ref.) | 1,000 | 0 (ref.) |
| 10 | in_batch | – | 101.0 | 1.010 | 1,200 | +200 |
| 10 | top-K | exact | 130.0 | 1.300 | 1,300 | +300 |
| 10 | top-K | ivf (kept) | 125.0 | 1.250 | 1,350 | +350 |
| 1,000 | top-K | ivf (kept) | skipped: too big | – | – | – |
<!-- end bench/reclaim_overhead.py{suffix} -->
"""


def test_the_overhead_is_read_from_the_blocks(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    assert hook.bench_overhead(path)["status"] == "missing" and "is missing" in hook.bench_text(path)
    path.write_text(BLOCK.format(suffix=""), encoding="utf-8")
    result = hook.bench_overhead(path)
    assert result["status"] == "ok" and result["date"] == "2026-01-02 03:00 UTC" and result["k"] == "100"
    assert result["rows"] == [{"bank_rows": "10", "time_pct": pytest.approx(25.0), "extra_mib": "+350"}]
    assert "10 bank rows: +25.0 % time per step, +350 MiB peak" in hook.bench_text(path)
    assert hook.bench_numbers(path) == "bench top-K: +25 % at 10 rows; memory +350 MiB at 10"
    path.write_text(BLOCK.format(suffix="") + BLOCK.format(suffix=" " + hook.INTERLEAVED).replace("1.250", "1.125"),
                    encoding="utf-8")
    assert "the figure to read for time: 10 bank rows: +12.5 %" in hook.bench_text(path)
    assert hook.bench_numbers(path).startswith("bench top-K: +12 % at 10 rows paired in time")
    path.write_text(BLOCK.format(suffix="").replace("ivf (kept)", "flat"), encoding="utf-8")
    assert hook.bench_overhead(path)["status"] == "no top-K rows"
