"""experiments/reclaim.py: plan, overrides, the plain baseline's config, timing, report, plot, summary (no training)."""

from __future__ import annotations

import json

import pytest

from tests.experiments._scripts import load_experiment

rc = load_experiment("reclaim")
harness = rc.harness


def _args(*argv: str):
    return rc.build_parser().parse_args(list(argv))


def test_default_plan_settings_and_seeds():
    args = _args()
    expected = [
        "sst2/plain", "sst2/top100", "mrpc/plain", "mrpc/top100", "rte/plain", "rte/top100",
        "sst2/in_batch", "sst2/random",
        "sst2/semi1/lam0", "sst2/semi1/k10", "sst2/semi5/lam0", "sst2/semi5/k10",
        "sst2/semi10/lam0", "sst2/semi10/k10",
    ]
    assert rc.settings(args) == expected
    plan = rc.plan(args)
    assert len(plan) == len(expected) * 5 and len(set(plan)) == len(plan)
    assert [seed for _, seed in plan[: len(expected)]] == [1] * len(expected)  # seed-major
    assert {seed for _, seed in plan} == {1, 2, 3, 4, 5}
    assert rc.n_train(args, "sst2/top100") == 1500
    assert rc.n_train(args, "mrpc/plain") == 600
    assert [rc.n_train(args, f"sst2/semi{p}/k10") for p in ("1", "5", "10")] == [200, 1000, 2000]


def test_every_run_loads_with_valid_keys():
    from contrastext.runs.reclaim import ReclaimArgs
    from contrastext.runs.scl import SCLArgs

    args = _args()
    models = {"reclaim": ReclaimArgs, "scl": SCLArgs}
    for setting in rc.settings(args):
        recipe, sets = rc.overrides(args, setting, 3)
        config = rc.load(recipe, sets)
        method_args = config.method_args_as(models[recipe])
        task, variant, fraction = rc.parse_setting(setting)
        assert config.method == recipe and config.seed == 3 and config.data.task == task
        assert config.length_from == "epochs" and config.train.epochs == 3
        assert config.train.metric_for_best is None and config.train.log_every == 1
        if recipe == "scl":
            assert variant == "plain" and method_args.lam == 0 and method_args.seeds == [3]
            assert method_args.protocol == "dev" and config.data.few_shot_sampling == "per_class"
        elif fraction is not None:
            assert method_args.labelled_fraction == fraction and method_args.k == 10
            assert method_args.lam == (0 if variant == "lam0" else 0.1)
            assert config.data.few_shot is None and config.data.limit == 20_000
        else:
            assert method_args.lam == 0.1 and method_args.k == 100
            assert method_args.negatives == {"top100": "topk"}.get(variant, variant)
            assert method_args.random_fraction == 0.8


def test_plain_baseline_trains_like_the_reclaim_recipe():
    """The scl λ = 0 run and the reclaim run agree on every train / data / eval key and the head's args."""
    from contrastext.runs.reclaim import ReclaimArgs
    from contrastext.runs.scl import SCLArgs

    args = _args()
    for task in rc.TASKS:
        plain = rc.load(*rc.overrides(args, f"{task}/plain", 2))
        top = rc.load(*rc.overrides(args, f"{task}/top100", 2))
        a, b = plain.model_dump(), top.model_dump()
        for section in ("train", "data", "eval"):
            assert a[section] == b[section], section
        assert (a["model"], a["seed"]) == (b["model"], b["seed"])
        p, t = plain.method_args_as(SCLArgs), top.method_args_as(ReclaimArgs)
        assert (p.pooling, p.head_dropout) == (t.pooling, t.head_dropout)


def test_step_sizes_and_timing(tmp_path):
    assert rc.step_sizes(40, 32, 6) == [32, 8, 32, 8, 32, 8]
    assert rc.step_sizes(64, 32, 4) == [32, 32, 32, 32]
    log = tmp_path / "train_log.jsonl"
    rates = [1.0, 16.0, 8.0, 16.0, 8.0, 16.0]  # step 1 slow (loader start); full steps 2 s, partial 0.5 s
    with log.open("w") as stream:
        for step, rate in enumerate(rates, start=1):
            stream.write(json.dumps({"step": step, "samples_per_s": rate, "loss/task": 0.5, "loss/ans": 3.0}) + "\n")
    got = rc.timing(log, 40)
    assert got["steps"] == 6
    assert got["train_s"] == pytest.approx(32 + 0.5 + 4 + 0.5 + 4 + 0.5)
    assert got["step_ms"] == pytest.approx(4000.0)  # full batches after step 1: steps 3 and 5
    assert got["step_ms_mean"] == pytest.approx(got["train_s"] * 1000 / 6)
    assert rc.loss_at_end(log, "loss/ans") == pytest.approx(3.0)
    assert rc.loss_at_end(log, "loss/ce") is None
    assert rc._skipped_steps(log) == 0
    with log.open("a") as stream:
        stream.write(json.dumps({"step": 7, "samples_per_s": 8.0, "skipped_nonfinite": 2}) + "\n")
    assert rc._skipped_steps(log) == 2


def _fabricate(store, args, settings, seeds, shift=None):
    """Records with a metric that depends on the variant (top-K +1 point), and step times."""
    shift = shift or {"plain": 0.0, "top100": 1.0, "in_batch": 0.2, "random": -0.5, "lam0": 0.0, "k10": 0.4}
    timing = harness.RunTiming(load_before=[1.0, 1.0, 1.0], load_after=[1.2, 1.0, 1.0], wall_s=60.0)
    for seed in seeds:
        for setting in settings:
            task, variant, fraction = rc.parse_setting(setting)
            recipe, sets = rc.overrides(args, setting, seed)
            metrics = {
                "metric": 80.0 + shift[variant] + 0.3 * seed + (10 * fraction if fraction else 0.0),
                "accuracy": 80.0, "f1": None, "mcc": 50.0, "n_train": rc.n_train(args, setting), "n_eval": 872,
                "steps": 141, "step_ms": 300.0 * (1.2 if variant == "top100" else 1.0) + seed,
                "step_ms_mean": 310.0, "train_s": 40.0, "task_loss_end": 0.3,
                "ans_end": None if variant == "plain" else 60.0,
            }
            store.add(setting, seed, {"recipe": recipe, "overrides": sets[1:]}, metrics, timing)


def test_report_plot_summary_full_and_partial(tmp_path):
    args = _args("--results", str(tmp_path), "--runs", str(tmp_path / "runs"))
    store = harness.RecordStore(rc.NAME, tmp_path)
    text = rc.report(store, args)  # no records at all
    assert text.startswith("## RECLAIM")
    assert "not enough seeds" in text and "–" in text
    assert rc.summary(store)["verdict"] == "partial: 0/70 runs"

    _fabricate(store, args, ["sst2/plain", "sst2/top100", "mrpc/plain"], seeds=[1])  # partial
    text = rc.report(store, args)
    assert "not enough seeds" in text
    rc.plot(store, args, tmp_path / "partial.png")
    assert (tmp_path / "partial.png").stat().st_size > 0

    _fabricate(store, args, rc.settings(args), seeds=[1, 2, 3, 4, 5])
    text = rc.report(store, args)
    for needed in ("### The claims (verbatim)", "consistently improves the performance on all GLUE datasets",
                   "### The paper's numbers", "45 / 47 / 81 min", "### Protocol", "sentence-tuned",
                   "### Our results", "**Verdict:** Table 1, SST-2", "**Verdict:** ablation, top-K vs random",
                   "**Verdict:** semi-supervised 5 %", "![RECLAIM", "python experiments/reclaim.py",
                   "SST-2 +19.", "70 of the plan's 70 runs"):
        assert needed in text, needed
    assert text.index("### The claims") < text.index("### The paper's numbers") < text.index("### Protocol")
    assert text.index("### Protocol") < text.index("### Our results") < text.index("**Verdict:**")
    assert text.index("**Verdict:**") < text.index("![RECLAIM") < text.index("### Command")
    # top-K is exactly +1 at every seed: a degenerate interval (1, 1) excludes 0 -> reproduced
    assert "Δ = +1.00, 95 % CI [+1.00, +1.00] → reproduced" in text
    summary = rc.summary(store)
    assert set(summary) == {"paper", "claim", "verdict", "numbers"}
    assert summary["verdict"].startswith("Table 1 reproduced on 3/3 tasks")
    assert "SST-2 +1.00" in summary["numbers"]
    path = harness.write_report(store, text)
    assert path.read_text().rstrip().endswith("min of run time in all.")
    rc.plot(store, args, tmp_path / f"{rc.NAME}.png")
    assert (tmp_path / f"{rc.NAME}.png").stat().st_size > 10_000


def test_incompatible_records_are_refused(tmp_path):
    args = _args("--results", str(tmp_path))
    store = harness.RecordStore(rc.NAME, tmp_path)
    _fabricate(store, args, ["sst2/plain"], seeds=[1])
    rc.check_compatible(store, args)  # the same options: fine
    with pytest.raises(SystemExit, match="other options"):
        rc.check_compatible(store, _args("--results", str(tmp_path), "--sst2-per-class", "100"))


def test_main_report_only_writes_report_and_plot(tmp_path):
    store = harness.RecordStore(rc.NAME, tmp_path)
    _fabricate(store, _args(), ["sst2/plain", "sst2/top100"], seeds=[1, 2])
    assert rc.main(["--report-only", "--results", str(tmp_path), "--runs", str(tmp_path / "runs")]) == 0
    assert (tmp_path / "reclaim.md").exists() and (tmp_path / "reclaim.png").exists()
    assert len(harness.RecordStore(rc.NAME, tmp_path).records) == 4


BLOCK = """# Benchmarks

<!-- begin bench/reclaim_overhead.py -->
- date: 2026-01-02 03:00 UTC; machine: x86_64
- step = ... K = 100; median of 20 steps

| bank rows | negatives | search | ms/step | time vs baseline | peak MiB | + MiB |
|---:|---|---|---:|---:|---:|---:|
| 10 | baseline | – | 100.0 | 1 (ref.) | 1,000 | 0 (ref.) |
| 10 | in_batch | – | 101.0 | 1.010 | 1,200 | +200 |
| 10 | top-K | exact | 130.0 | 1.300 | 1,300 | +300 |
| 10 | top-K | ivf (kept) | 125.0 | 1.250 | 1,350 | +350 |
| 1,000 | top-K | ivf (kept) | skipped: too big | – | – | – |
<!-- end bench/reclaim_overhead.py -->
"""


def test_bench_overhead_is_read_from_the_block(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(BLOCK, encoding="utf-8")
    result = rc.bench_overhead(path)
    assert result["status"] == "ok" and result["date"] == "2026-01-02 03:00 UTC" and result["k"] == "100"
    assert result["rows"] == [{"bank_rows": "10", "time_pct": pytest.approx(25.0), "extra_mib": "+350"}]
    assert result["in_batch_mib"] == ["+200"]
    text = rc.bench_overhead_text(result)
    assert "10 bank rows: +25.0 % time per step, +350 MiB peak" in text and "2026-01-02" in text


def test_bench_overhead_says_when_the_block_is_missing(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    assert rc.bench_overhead(path)["status"] == "missing"
    path.write_text("# Benchmarks\n\nno block here\n", encoding="utf-8")
    assert "is missing" in rc.bench_overhead_text(rc.bench_overhead(path))
    path.write_text(BLOCK.replace("ivf (kept)", "flat"), encoding="utf-8")
    assert rc.bench_overhead(path)["status"] == "no top-K rows"


def test_report_states_the_block_and_no_stale_sentence(tmp_path):
    bench = tmp_path / "BENCHMARKS.md"
    bench.write_text(BLOCK, encoding="utf-8")
    args = _args("--results", str(tmp_path), "--benchmarks", str(bench))
    text = rc.report(harness.RecordStore(rc.NAME, tmp_path), args)
    assert "not filled yet" not in text
    assert "10 bank rows: +25.0 % time per step" in text
    bench.unlink()
    assert "block is missing" in rc.report(harness.RecordStore(rc.NAME, tmp_path), args)
