"""experiments/scl_few_shot.py and experiments/scl_noise.py without training: the plans, every run's overrides
(valid config keys and method_args), the migration of the first version's records, the tuned-λ selection, the
floor-effect guard, the reports, plots and summaries from fabricated records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.experiments._scripts import load_experiment

REPO = Path(__file__).resolve().parents[2]
CHANCE = 50.9  # the majority-class share the tests assume (SST-2 dev: 444 of 872 rows positive)
GRID = (0.1, 0.5, 0.9)


fs = load_experiment("scl_few_shot")
noise = load_experiment("scl_noise")
h = fs.harness
MAJORITY_SHARE = fs.majority_share  # the real one (reads SST-2), before the fixture replaces it


@pytest.fixture(autouse=True)
def _fixed_chance_level(monkeypatch):
    """Reports and plots read the chance level from SST-2: a fixed one here (no data needed, fast)."""
    fixed = lambda args: (CHANCE, f"Chance level: {CHANCE} % (fixed by the test).")  # noqa: E731
    monkeypatch.setattr(fs, "majority_share", fixed)
    monkeypatch.setattr(noise, "majority_share", fixed)


def _check_overrides(sets: list[str]):
    from contrastext.runs.recipes import recipe_path
    from contrastext.runs.scl import SCLArgs
    from contrastext.training.config import load_config

    config = load_config(recipe_path("scl"), sets)
    return config, config.method_args_as(SCLArgs)


def _fabricate(store, settings_values: dict[str, dict[int, tuple[float, float]]]):
    timing = h.RunTiming(load_before=[0.5, 0.5, 0.5], load_after=[0.6, 0.6, 0.6], wall_s=30.0)
    for setting, draws in settings_values.items():
        for seed, (validation, test) in draws.items():
            store.add(setting, seed, {"recipe": "scl", "overrides": []},
                      {"validation_accuracy": validation, "test_accuracy": test, "best_step": 60}, timing)


# ------------------------------------------------------------------------------------- losses and λ


def test_loss_names_and_lam_option():
    assert fs.losses(GRID) == ["ce", "ce+scl@0.1", "ce+scl@0.5", "ce+scl@0.9"]
    assert fs.scl_loss(0.5) == "ce+scl@0.5" and fs.scl_loss(1.0) == "ce+scl@1"
    assert fs.loss_lam("ce") == 0.0 and fs.loss_lam("ce+scl@0.1") == 0.1
    for bad in ("ce+scl", "ce+scl@tuned", "ce+scl@1.5", "ce+scl@0", "ce+scl@0.50", "supcon"):
        with pytest.raises(ValueError):
            fs.loss_lam(bad)
    assert fs.parse_setting("n20/ce+scl@0.5") == (20, "ce+scl@0.5")
    assert noise.parse_setting("p40/ce+scl@0.9") == (40, "ce+scl@0.9")
    for bad in ("n20/ce+scl", "x20/ce", "n/ce", "n20/ce+scl@tuned"):
        with pytest.raises(ValueError):
            fs.parse_setting(bad)
    with pytest.raises(ValueError):
        noise.parse_setting("p0/ce+scl")
    assert fs.parse_args(["--lams", "0.9", "0.5", "0.5"]).lams == [0.5, 0.9]
    assert noise.parse_args([]).lams == [0.1, 0.5, 0.9]
    for bad in (["--lams", "0"], ["--lams", "1.2"]):
        with pytest.raises(SystemExit):
            fs.parse_args(bad)
    assert "--lams 0.5 0.9" in fs._extra(fs.parse_args(["--lams", "0.5", "0.9"]))
    assert "--lams" not in noise._extra(noise.parse_args([]))


# ------------------------------------------------------------------------------------------- few-shot


def test_few_shot_plan_at_defaults_is_3_sizes_x_4_settings_x_10_draws():
    args = fs.parse_args([])
    plan = fs.plan(args)
    assert len(plan) == 120 and len(set(plan)) == 120
    assert {s for s, _ in plan} == {
        f"n{n}/{loss}" for n in (20, 100, 1000) for loss in ("ce", "ce+scl@0.1", "ce+scl@0.5", "ce+scl@0.9")
    }
    assert sorted({seed for _, seed in plan}) == list(range(1, 11))
    assert {seed for _, seed in plan[:12]} == {1}  # draws outermost: a partial sitting stays balanced
    assert args.steps_per_size == {20: 200, 100: 150, 1000: 125}


def test_few_shot_overrides_load_and_set_the_paper_protocol(tmp_path):
    args = fs.parse_args(["--runs", str(tmp_path)])
    folders = set()
    for setting in ("n20/ce", "n20/ce+scl@0.1", "n20/ce+scl@0.5", "n1000/ce+scl@0.9"):
        config, method_args = _check_overrides(fs.overrides(args, setting, 7))
        n, loss = fs.parse_setting(setting)
        assert config.data.few_shot == n
        assert method_args.seeds == [7]
        assert method_args.lam == pytest.approx(fs.loss_lam(loss))
        assert method_args.temperature == 0.3
        assert method_args.protocol == "validation_test" and method_args.split_seed == 0
        assert config.eval.limit is None  # the recipe's validation / test split of the whole dev set
        assert config.train.max_steps == args.steps_per_size[n]
        assert config.train.batch_size == 16 and config.train.lr == 1e-5
        assert config.train.progress_bar is False and config.train.overwrite is True
        assert Path(config.output_dir).is_relative_to(tmp_path)
        folders.add(config.output_dir)
    assert len(folders) == 4  # one folder per λ


def test_few_shot_per_size_options():
    args = fs.parse_args(["--sizes", "20", "100", "--steps", "4", "--eval-every", "2", "3"])
    assert args.steps_per_size == {20: 4, 100: 4}
    assert args.eval_every_per_size == {20: 2, 100: 3}
    with pytest.raises(SystemExit):
        fs.parse_args(["--sizes", "20", "100", "1000", "--steps", "4", "5"])
    with pytest.raises(SystemExit):
        fs.parse_args(["--sizes", "50"])  # no default length for N = 50


def _few_shot_store(tmp_path, draws=range(1, 11), sizes=(20, 100, 1000)):
    """CE; λ 0.5 always best on validation (its test = CE + gain); λ 0.1 in between; λ 0.9 at chance."""
    store = h.RecordStore(fs.NAME, tmp_path)
    values = {}
    for n in sizes:
        gain = {20: 3.0, 100: 1.0, 1000: -0.1}[n]
        values[f"n{n}/ce"] = {s: (70.0 + s, 68.0 + s * 0.5) for s in draws}
        values[f"n{n}/ce+scl@0.1"] = {s: (70.5 + s, 68.0 + s * 0.5 + gain / 2) for s in draws}
        values[f"n{n}/ce+scl@0.5"] = {s: (71.0 + s, 68.0 + s * 0.5 + gain + 0.1 * (s % 3)) for s in draws}
        values[f"n{n}/ce+scl@0.9"] = {s: (52.0 + s % 2, 51.0 + 0.2 * s) for s in draws}
    _fabricate(store, values)
    return store


def test_few_shot_report_plot_and_summary_from_full_records(tmp_path):
    args = fs.parse_args(["--results", str(tmp_path)])
    store = _few_shot_store(tmp_path)
    text = fs.report(store, args)
    assert text.startswith("## SCL (Gunel et al., ICLR 2021)")
    assert "85.9 ± 2.1" in text and "88.1 ± 3.3" in text and "94.1 ± 0.5" in text
    assert "tuned on validation per draw from {0.1, 0.5, 0.9} (the paper tunes λ per task; grid not given)" in text
    assert text.count("**Verdict:**") == 4  # 3 N (tuned) + the trend; per-λ lines are bullets
    assert "**Verdict:** N = 20 (CE + SCL with λ tuned on validation per draw): n20/ce+scl@tuned" in text
    assert "→ reproduced" in text and "not reproduced at this scale" in text  # N = 1000: no gain
    assert "- λ = 0.9: n20/ce+scl@0.9" in text and "- λ = 0.1: n20/ce+scl@0.1" in text
    assert "CE + SCL (λ 0.9) is at chance" in text  # the per-λ line says so
    assert "| 20 | CE + SCL (λ tuned) | 88.1 ± 3.3 |" in text  # the paper's (tuned) figure on the tuned row
    assert "λ 0.5 ×10" in text and "**at chance**" in text
    assert "One λ for all draws instead" in text and "λ = 0.5." in text
    assert "120 runs" in text and "120/120 runs" in text
    assert "![" in text and "scl_few_shot.png" in text and "python experiments/scl_few_shot.py" in text
    # the top-3 figure: draws 10, 9, 8 by validation; CE test 68 + 0.5·s
    top = fs.top_k(store, "n20/ce")
    assert top["draws"] == [10, 9, 8] and top["mean"] == pytest.approx(68.0 + 4.5)
    assert "72.5 ± 0.5 (top 3)" in text
    tuned_top = fs.top_k(store, "n20/ce+scl@tuned")
    assert tuned_top["draws"] == [10, 9, 8]
    png = fs.plot(store, args, tmp_path / "scl_few_shot.png")
    assert png.stat().st_size > 1000
    result = fs.summary(store, args)
    assert set(result) == {"paper", "claim", "verdict", "numbers"}
    assert result["verdict"].startswith("partly")  # N = 20, 100 reproduced, 1000 not
    assert "N=20: Δ +3.1" in result["numbers"] and "λ tuned per draw from {0.1, 0.5, 0.9}" in result["numbers"]
    assert "at chance" not in result["numbers"]  # λ 0.9 is, but neither tuned CE + SCL nor CE
    assert fs.gain_trend(fs.comparisons(store, args.sizes))[0] == "reproduced"


def test_tuned_lam_is_picked_on_validation_per_draw(tmp_path):
    store = h.RecordStore(fs.NAME, tmp_path)
    # (validation, test); the test accuracies would pick differently: selection must read validation only.
    _fabricate(store, {
        "n20/ce": {d: (60.0, 60.0) for d in (1, 2, 3, 4, 5)},
        "n20/ce+scl@0.1": {1: (70.0, 90.0), 2: (80.0, 61.0), 3: (60.0, 90.0), 4: (70.0, 62.0), 5: (70.0, 90.0)},
        "n20/ce+scl@0.5": {1: (75.0, 63.0), 2: (78.0, 90.0), 3: (65.0, 64.0), 4: (70.0, 90.0), 5: (99.0, 99.0)},
        "n20/ce+scl@0.9": {1: (72.0, 90.0), 2: (79.0, 90.0), 3: (65.0, 90.0), 4: (70.0, 90.0)},  # no draw 5
    })
    tuned = fs.tuned_draws(store, "n20", GRID)
    assert sorted(tuned) == [1, 2, 3, 4]  # draw 5 lacks λ 0.9: left out
    assert [tuned[d]["lam"] for d in (1, 2, 3, 4)] == [0.5, 0.1, 0.5, 0.1]  # ties (3, 4) → the smaller λ
    assert [tuned[d]["test_accuracy"] for d in (1, 2, 3, 4)] == [63.0, 61.0, 64.0, 62.0]
    assert fs.tuned_draws(store, "n20", (0.9, 0.5, 0.1)) == tuned  # the order of --lams does not matter
    assert fs.picks(tuned) == "λ 0.1 ×2, 0.5 ×2"
    assert sorted(fs.tuned_draws(store, "n20", (0.1, 0.5))) == [1, 2, 3, 4, 5]  # a smaller grid: draw 5 counts
    c = fs.comparisons(store, [20], GRID)[20]
    assert c.seeds == [1, 2, 3, 4] and c.treatment == "n20/ce+scl@tuned"
    assert c.mean_difference == pytest.approx(2.5)
    assert fs.values_reader(store, GRID)("n20/ce", "test_accuracy") == store.values("n20/ce", "test_accuracy")


def test_floor_effect_flag(tmp_path):
    assert fs.at_chance([CHANCE + 3.0], CHANCE) and fs.at_chance([40.0], CHANCE)
    assert not fs.at_chance([CHANCE + 3.1], CHANCE)
    assert not fs.at_chance([], CHANCE) and not fs.at_chance([40.0], None)
    assert fs.chance_note([], CHANCE) == "" and fs.chance_note(["CE"], None) == ""
    assert fs.chance_note(["CE"], CHANCE).startswith("; CE is at chance")
    args = fs.parse_args(["--results", str(tmp_path), "--sizes", "20"])
    store = h.RecordStore(fs.NAME, tmp_path)
    _fabricate(store, {
        "n20/ce": {d: (55.0, 51.0 + d % 2) for d in range(1, 6)},  # mean 51.6: at chance
        **{f"n20/ce+scl@{lam:g}": {d: (60.0 + lam, 70.0 + d) for d in range(1, 6)} for lam in GRID},
    })
    assert fs.chance_losses(store, ["n20/ce", "n20/ce+scl@tuned"], CHANCE, GRID) == ["CE"]
    text = fs.report(store, args)
    assert "| 20 | CE | 85.9 ± 2.1 |" in text
    ce_row = next(line for line in text.splitlines() if line.startswith("| 20 | CE |"))
    assert ce_row.endswith("**at chance** |")
    verdict = next(line for line in text.splitlines() if line.startswith("**Verdict:** N = 20"))
    assert "→ reproduced; CE is at chance" in verdict
    assert "at chance: CE at N=20" in fs.summary(store, args)["numbers"]


def test_few_shot_partial_records_render(tmp_path):
    args = fs.parse_args(["--results", str(tmp_path)])
    store = h.RecordStore(fs.NAME, tmp_path)
    _fabricate(store, {
        "n20/ce": {1: (70.0, 69.0), 2: (71.0, 70.0)},
        "n20/ce+scl@0.1": {1: (72.0, 71.0)},
        "n20/ce+scl@0.5": {1: (72.0, 71.0), 2: (73.0, 71.5)},
    })
    text = fs.report(store, args)
    assert "not enough seeds (0 paired draw(s) with every λ of {0.1, 0.5, 0.9} recorded)" in text
    assert "- λ = 0.5: n20/ce+scl@0.5" in text  # two paired draws: a per-λ line with numbers
    assert "–" in text and "nan" not in text
    assert "5/120 runs; draws with every λ recorded (those tuned CE + SCL uses): N = 20: 0/10" in text
    verdict = fs.summary(store, args)["verdict"]
    assert verdict.startswith("partial: 5/120 runs") and "N=20 0/10" in verdict
    fs.plot(store, args, tmp_path / "partial.png")
    path = h.write_report(store, text)
    assert path.read_text().startswith("## SCL")
    empty = h.RecordStore("empty", tmp_path)
    assert "not enough seeds" in fs.report(empty, args)
    fs.plot(empty, args, tmp_path / "empty.png")


def test_few_shot_draw_record_reads_the_recipes_result(tmp_path):
    log = tmp_path / "train_log.jsonl"
    log.write_text(
        json.dumps({"step": 10, "loss": 1.0, "loss/ce": 0.6, "loss/supcon": 40.0}) + "\n"
        + json.dumps({"step": 20, "loss": 0.5, "loss/ce": 0.4, "loss/supcon": 38.0,
                      "eval/sst2_validation_accuracy": 75.0}) + "\n"
    )
    summary = {"runs": {"3": {
        "metrics": {"sst2_validation_accuracy": 75.0, "score": 75.0}, "best_step": 20, "last_step": 20,
        "log_path": str(log),
        "report": {"n_train": 20, "train_label_counts": {0: 9, 1: 11}, "n_validation": 436, "n_test": 436,
                   "test_metrics": {"sst2_test_accuracy": 73.5, "sst2_test_f1": float("nan")}},
    }}}
    metrics = fs.draw_record(summary, 3)
    assert metrics["validation_accuracy"] == 75.0 and metrics["test_accuracy"] == 73.5
    assert metrics["validation_curve"] == [[20, 75.0]] and metrics["last_loss_supcon"] == 38.0
    assert metrics["test_f1"] is None and metrics["train_label_counts"] == {"0": 9, "1": 11}
    json.dumps(metrics, allow_nan=False)
    summary["runs"]["3"]["report"]["test_metrics"] = {}
    with pytest.raises(RuntimeError, match="sst2_test_accuracy"):
        fs.draw_record(summary, 3)


def test_few_shot_main_report_only_writes_md_and_png(tmp_path):
    _few_shot_store(tmp_path, draws=range(1, 4), sizes=(20,))
    assert fs.main(["--report-only", "--results", str(tmp_path), "--sizes", "20"]) == 0
    assert (tmp_path / "scl_few_shot.md").read_text().startswith("## SCL")
    assert (tmp_path / "scl_few_shot.png").stat().st_size > 1000


# ------------------------------------------------------------------------------------------ migration


def _old_record(setting: str, seed: int, lam: float | None, test: float) -> dict:
    """A record as the first version wrote it (one λ, setting "<prefix>/ce+scl")."""
    lam_set = "method_args.lam=0.9" if lam is None else f"method_args.lam={lam:g}"
    config = {"recipe": "scl", "overrides": ["data.few_shot=2000", lam_set, "method_args.temperature=0.3"],
              "experiment": "scl_noise", "loss": "ce+scl", "temperature": 0.3, "subset": 2000, "max_steps": 125}
    if lam is not None:
        config["lam"] = lam
    return {"setting": setting, "seed": seed, "config": config,
            "metrics": {"validation_accuracy": test + 1, "test_accuracy": test, "best_step": 125},
            "wall_s": 40.0, "load_before": [1.0, 1.0, 1.0], "load_after": [1.0, 1.0, 1.0],
            "finished_at": "2026-11-24T03:01:40+00:00"}


def test_migration_renames_old_ce_scl_records_and_saves(tmp_path):
    ce = _old_record("p0/ce", 1, 0.0, 70.0)
    ce["config"]["loss"] = "ce"
    records = [ce, _old_record("p0/ce+scl", 1, 0.9, 53.0), _old_record("p40/ce+scl", 2, None, 50.0)]
    clash = _old_record("p20/ce+scl", 3, 0.9, 50.0)
    newer = _old_record("p20/ce+scl@0.9", 3, 0.9, 55.0)
    records += [clash, newer]
    (tmp_path / "scl_noise.json").write_text(json.dumps(records))
    store = fs.load_store(noise.NAME, tmp_path)
    settings = [r["setting"] for r in store.records]
    assert settings == ["p0/ce", "p0/ce+scl@0.9", "p40/ce+scl@0.9", "p20/ce+scl", "p20/ce+scl@0.9"]
    moved = store.get("p0/ce+scl@0.9", 1)
    assert moved["renamed_from"] == "p0/ce+scl" and moved["config"]["loss"] == "ce+scl@0.9"
    assert moved["config"]["overrides"] == records[1]["config"]["overrides"]  # the run itself is unchanged
    assert store.get("p20/ce+scl@0.9", 3)["metrics"]["test_accuracy"] == 55.0  # the newer record is kept
    on_disk = [r["setting"] for r in json.loads((tmp_path / "scl_noise.json").read_text())]
    assert on_disk == settings  # saved back
    before = (tmp_path / "scl_noise.json").read_text()
    assert fs.migrate(h.RecordStore(noise.NAME, tmp_path)) == 0  # idempotent
    fs.load_store(noise.NAME, tmp_path)
    assert (tmp_path / "scl_noise.json").read_text() == before
    args = noise.parse_args(["--results", str(tmp_path)])
    assert store.has("p0/ce+scl@0.9", 1) and ("p0/ce+scl@0.9", 1) in noise.plan(args)  # reused, not rerun
    # summary() (called by results_page.py on a store it loads itself) renames in memory too
    (tmp_path / "scl_noise.json").write_text(json.dumps(records[:3]))
    plain = h.RecordStore(noise.NAME, tmp_path)
    assert noise.summary(plain, args)["verdict"].startswith("partial: 3/60 runs")


def test_migration_of_the_first_noise_sitting(tmp_path):
    source = REPO / "docs" / "results" / "scl_noise.json"
    if not source.exists():
        pytest.skip("docs/results/scl_noise.json not there")
    shutil.copy(source, tmp_path / "scl_noise.json")
    store = fs.load_store(noise.NAME, tmp_path)
    assert not any(r["setting"].endswith("/ce+scl") for r in store.records)
    assert sum(r["setting"].endswith("/ce+scl@0.9") for r in store.records) >= 15
    args = noise.parse_args(["--results", str(tmp_path)])
    text = noise.report(store, args)
    assert "p0/ce+scl@0.9" in text and "Why λ is tuned" in text
    assert "weighs 1 − λ = 0.1" in text
    assert noise.summary(store, args)["verdict"]  # renders


def test_chance_level_from_the_test_rows(monkeypatch):
    from contrastext.errors import MissingDataError

    args = fs.parse_args(["--data-root", "/nowhere"])
    monkeypatch.setattr(fs, "test_label_counts", lambda root, limit=None: (("0", 214), ("1", 222)))
    share, text = MAJORITY_SHARE(args)
    assert share == pytest.approx(100 * 222 / 436) and "436 test rows" in text and "at chance" in text

    def missing(root, limit=None):
        raise MissingDataError("no SST-2 here")

    monkeypatch.setattr(fs, "test_label_counts", missing)
    share, text = MAJORITY_SHARE(args)
    assert share is None and text.startswith("Chance level unknown")


def test_chance_level_of_the_recipes_split_on_sst2():
    data_root = REPO.parent / "shared" / "data"
    if not (data_root / "glue" / "SST-2" / "dev.tsv").exists():
        pytest.skip("SST-2 not under ../shared/data")
    counts = dict(fs.test_label_counts(str(data_root)))
    assert sum(counts.values()) == 436
    assert 50.0 < 100 * max(counts.values()) / 436 < 52.0  # SST-2 dev: 444 of 872 positive


# ---------------------------------------------------------------------------------------------- noise


def test_noise_plan_at_defaults_is_3_rates_x_4_settings_x_5_seeds():
    args = noise.parse_args([])
    plan = noise.plan(args)
    assert len(plan) == 60 and len(set(plan)) == 60
    assert {s for s, _ in plan} == {
        f"p{p}/{loss}" for p in (0, 20, 40) for loss in ("ce", "ce+scl@0.1", "ce+scl@0.5", "ce+scl@0.9")
    }
    assert sorted({seed for _, seed in plan}) == [1, 2, 3, 4, 5]
    assert {seed for _, seed in plan[:12]} == {1}  # seeds outermost


def test_noise_overrides_load(tmp_path):
    args = noise.parse_args(["--runs", str(tmp_path)])
    for setting in ("p0/ce", "p20/ce+scl@0.5", "p40/ce", "p40/ce+scl@0.1"):
        config, method_args = _check_overrides(noise.overrides(args, setting, 4))
        p, loss = noise.parse_setting(setting)
        assert config.data.few_shot == 2000 and config.data.label_noise == pytest.approx(p / 100)
        assert method_args.seeds == [4] and method_args.lam == pytest.approx(fs.loss_lam(loss))
        assert config.train.max_steps == 125 and config.train.eval_every == 25
        assert config.eval.limit is None


def _noise_store(tmp_path, seeds=range(1, 6)):
    """CE; λ 0.5 always best on validation (the first version's CE + SCL numbers); λ 0.9 at chance."""
    store = h.RecordStore(noise.NAME, tmp_path)
    values = {}
    for p in (0, 20, 40):
        values[f"p{p}/ce"] = {s: (80.0 + s, 80.0 - p / 10 + s) for s in seeds}
        values[f"p{p}/ce+scl@0.1"] = {s: (80.2 + s, 79.0 + s) for s in seeds}
        values[f"p{p}/ce+scl@0.5"] = {s: (80.5 + s, 79.9 - p / 20 + s + 0.2 * (s % 2)) for s in seeds}
        values[f"p{p}/ce+scl@0.9"] = {s: (55.0 + s % 2, 50.5 + 0.1 * s) for s in seeds}
    _fabricate(store, values)
    return store


def test_noise_report_plot_and_summary(tmp_path):
    args = noise.parse_args(["--results", str(tmp_path)])
    store = _noise_store(tmp_path)
    text = noise.report(store, args)
    assert text.startswith("## SCL (Gunel et al., ICLR 2021): robustness")
    assert "label flips" in text and "91.2±0.6" in text
    assert text.count("**Verdict:**") == 4
    assert "0 % flipped (CE + SCL with λ tuned on validation per seed): p0/ce+scl@tuned" in text
    assert "the gap grows with noise (0 % → 40 %, λ tuned)" in text
    assert "- 40 % flipped, λ = 0.9: p40/ce+scl@0.9" in text and "CE + SCL (λ 0.9) is at chance" in text
    assert "Why λ is tuned" in text and "53.1, 50.0, 50.3" in text and "weighs 1 − λ = 0.1" in text
    assert "tuned on validation per seed (and flip rate) from {0.1, 0.5, 0.9}" in text
    assert "60/60 runs" in text
    growth = noise.gap_growth(store, 0, 40)
    assert growth.mean_difference == pytest.approx(2.0) and growth.verdict == "reproduced"
    growth_line = next(line for line in text.splitlines() if line.startswith("**Verdict:** the gap grows"))
    assert "floor effect" not in growth_line  # neither CE nor tuned CE + SCL is at chance here
    noise.plot(store, args, tmp_path / "scl_noise.png")
    result = noise.summary(store, args)
    assert set(result) == {"paper", "claim", "verdict", "numbers"}
    assert result["verdict"].startswith("partly")  # 0 %: Δ = ±0.1 around 0
    assert "gap growth 0→40%: +2.0" in result["numbers"]


def test_noise_gap_growth_at_a_floor_says_so(tmp_path):
    args = noise.parse_args(["--results", str(tmp_path), "--noise", "0", "40"])
    store = h.RecordStore(noise.NAME, tmp_path)
    values = {}
    for p, ce_test in ((0, 70.0), (40, 51.0)):  # CE falls to chance at 40 %
        values[f"p{p}/ce"] = {s: (60.0, ce_test + 0.3 * s) for s in range(1, 6)}
        for lam in GRID:
            values[f"p{p}/ce+scl@{lam:g}"] = {s: (60.0 + lam, 60.0 + 0.1 * s * (1 + s % 2)) for s in range(1, 6)}
    _fabricate(store, values)
    text = noise.report(store, args)
    growth_line = next(line for line in text.splitlines() if line.startswith("**Verdict:** the gap grows"))
    assert "→ reproduced, but CE is at chance at 40 %: a floor effect, not robustness" in growth_line
    verdict_40 = next(line for line in text.splitlines() if line.startswith("**Verdict:** 40 % flipped"))
    assert "CE is at chance" in verdict_40
    assert "floor effect" in noise.summary(store, args)["numbers"]


def test_noise_partial_records_render(tmp_path):
    args = noise.parse_args(["--results", str(tmp_path)])
    store = h.RecordStore(noise.NAME, tmp_path)
    _fabricate(store, {"p0/ce": {1: (80.0, 79.0)}, "p0/ce+scl@0.9": {1: (81.0, 80.0)}})
    text = noise.report(store, args)
    assert "not enough seeds" in text and "nan" not in text
    assert "seeds with every λ recorded (those tuned CE + SCL uses): 0 %: 0/5" in text
    assert noise.summary(store, args)["verdict"].startswith("partial: 2/60 runs")
    noise.plot(store, args, tmp_path / "partial.png")
    assert noise.main(["--report-only", "--results", str(tmp_path)]) == 0
    assert (tmp_path / "scl_noise.png").exists()
