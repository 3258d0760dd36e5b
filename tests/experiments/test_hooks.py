"""What each paper's hook (experiments/hooks/<name>.py) does that no spec can say, without training; the plans,
configs, records and pages of every spec are tests/experiments/test_run.py's."""

from __future__ import annotations

import json
import math

import pytest

from contrastext import load_config, recipe_path
from contrastext.objectives.registry import objectives_taking
from tests.experiments._scripts import load_experiment

run, specs, harness = load_experiment("run"), load_experiment("spec"), load_experiment("harness")
verdicts = load_experiment("verdicts")
TIMING = harness.RunTiming()


def _setup(name, tmp_path, *extra):
    experiment = specs.load_spec(name)
    args = run.build_parser(experiment).parse_args(["--results", str(tmp_path), "--runs", str(tmp_path / "runs"), *extra])
    return experiment, args, harness.RecordStore(name, tmp_path), run.load_hook(experiment.hook)


def test_scl_tunes_lam_per_draw_on_validation_and_reads_the_chance_level(tmp_path, data_root):
    experiment, _, store, scl = _setup("scl_few_shot", tmp_path)
    draws = {  # (validation, test): the test accuracies would pick otherwise
        "n20/ce": {d: (60.0, 60.0) for d in (1, 2, 3, 4, 5)},
        "n20/ce+scl@0.1": {1: (70.0, 90.0), 2: (80.0, 61.0), 3: (60.0, 90.0), 4: (70.0, 62.0), 5: (70.0, 90.0)},
        "n20/ce+scl@0.5": {1: (75.0, 63.0), 2: (78.0, 90.0), 3: (65.0, 64.0), 4: (70.0, 90.0), 5: (99.0, 99.0)},
        "n20/ce+scl@0.9": {1: (72.0, 90.0), 2: (79.0, 90.0), 3: (65.0, 90.0), 4: (70.0, 90.0)}}  # no draw 5
    for setting, found in draws.items():
        for d, (v, t) in found.items():
            store.add(setting, d, {}, {"validation_accuracy": v, "test_accuracy": t, "best_step": 60 + d}, TIMING)
    values = run.values_reader(experiment, store)
    assert values("n20/ce+scl@tuned", "lam") == {1: 0.5, 2: 0.1, 3: 0.5, 4: 0.1}  # ties → the smaller λ
    assert values("n20/ce+scl@tuned", "test_accuracy") == {1: 63.0, 2: 61.0, 3: 64.0, 4: 62.0}
    assert values("n20/ce+scl@tuned", "best_step") == {1: 61.0, 2: 62.0, 3: 63.0, 4: 64.0}  # the picked run's
    assert values("gap@n20", "test_accuracy") == {1: 3.0, 2: 1.0, 3: 4.0, 4: 2.0}
    assert values("gap@n20/ce+scl@0.9", "test_accuracy") == {d: 30.0 for d in (1, 2, 3, 4)}
    tuned = next(stats for _, stats, t, b in verdicts.comparisons(experiment, store) if (t, b) == ("n20/ce+scl@tuned", "n20/ce"))
    assert tuned.n == 4 and tuned.delta == 2.5
    rule = {  # validation accuracies of draws 1-5: the top 3's mean picks, not the mean of all
        "n20-rule/ce@head_lr=1e-05": [90, 90, 90, 10, 10], "n20-rule/ce@head_lr=0.0001": [80] * 5,
        "n20-rule/ce@head_lr=0.001": [90, 90, 90, 0, 0],  # tied with 1e-05: the first in the grid
        "n20-rule/ce+scl@0.1": [70] * 5, "n20-rule/ce+scl@0.5": [60, 60, 60, 60, 99], "n20-rule/ce+scl@0.9": [65] * 4}
    for setting, found in rule.items():  # test accuracy: draw + 50, so the picked setting shows in the values
        for d, v in enumerate(found, 1):
            store.add(setting, d, {}, {"validation_accuracy": v, "test_accuracy": d + v / 1000}, TIMING)
    values = run.values_reader(experiment, store)  # ce+scl@0.5's draw 5 is not one every candidate has
    assert values("n20-rule/ce@rule", "test_accuracy") == {d: d + v / 1000 for d, v in enumerate(rule["n20-rule/ce@head_lr=1e-05"], 1)}
    assert values("n20-rule/ce+scl@rule", "validation_accuracy") == {d: 70 for d in range(1, 6)}
    assert scl.at_chance([53.9], 50.9) and scl.at_chance([40.0], 50.9) and not scl.at_chance([54.0], 50.9)
    assert scl.chance(str(data_root))[0] == pytest.approx(100 * 222 / 436)  # the test split's majority (of 214 + 222)


def test_capt_finetunes_on_its_variants_cached_encoder_wherever_the_runs_folder_lies(tmp_path, data_root):
    experiment, args, _, hook = _setup("capt", tmp_path, "--data-root", str(data_root))
    runs = {(r.name, r.seed): r for r in run.plan(experiment, args)}
    finetune, pretrain = runs[("mask/rte", 4)], runs[("pretrain/mask", 0)]
    assert "model=<runs>/pretrained/mask/encoder" in finetune.overrides
    assert hook._weights(finetune, "mask") == hook._weights(pretrain, "mask") == tmp_path / "runs/capt/pretrained/mask"
    moved = [item.replace(str(tmp_path / "runs"), "/elsewhere/runs/experiments") for item in finetune.overrides]
    assert run.comparable(moved) == finetune.comparable()  # a record made with another --runs
    assert runs[("none/rte", 4)].overrides[1] == "model=bundled:all-MiniLM-L6-v2"
    assert hook._cached(pretrain, "mask", pretrain.comparable()) is None  # nothing pre-trained yet

    # from scratch: one encoder per variant and pre-training seed (the record's), fine-tuned with the grid's fseed
    scratch, made = runs[("scratch/mask/sst2@f2", 3)], runs[("scratch/pretrain/mask", 3)]
    assert hook._key(scratch) == hook._key(made) == "scratch-mask-seed-3"
    assert f"model={hook._weights(made, hook._key(made))}/encoder" in hook._resolved(scratch)
    assert hook._pretraining(scratch, args) is not None and (hook._pretraining(scratch, args).name,
                                                             hook._pretraining(scratch, args).seed) == ("scratch/pretrain/mask", 3)
    store = harness.RecordStore("capt", tmp_path)
    for fseed, accuracy in ((1, 80.0), (2, 82.0), (3, 84.0)):
        store.add(f"scratch/mask/sst2@f{fseed}", 3, {}, {"accuracy": accuracy}, TIMING)
    values = run.values_reader(experiment, store)
    assert values("scratch/mask/sst2", "accuracy") == {3: 82.0}
    store.add("scratch/mask/sst2@f1", 4, {}, {"accuracy": 70.0}, TIMING)  # seed 4 lacks two fine-tunings
    assert values("scratch/mask/sst2", "accuracy") == {3: 82.0}
    hook.prepare_corpus(args)  # the corpus the pre-training's data.path names: wiki1m's sentences, then SST-2's
    corpus = (tmp_path / "runs/capt" / hook.CORPUS).read_text(encoding="utf-8").splitlines()
    assert f"data.path={tmp_path / 'runs/capt' / hook.CORPUS}" in hook._resolved(made)
    assert corpus[0] == "YMCA in South Australia" and len(corpus) <= 11914 + 67349
    assert corpus[-1] == "this new jangle of noise , mayhem and stupidity must be a serious contender for the title ."


def test_gd_losses_reads_the_gradient_ratios_of_a_runs_curves():
    hook = run.load_hook("gd_losses")
    curves = {"steps": [0, 50, 100], "grad_alignment": [2.0, 1.25, 0.5], "grad_uniformity": [1.0, 0.5, 0.0],
              "grad_total": [3.0, 1.75, 0.5]}
    metrics = hook.gradient_summary(curves)
    assert (metrics["grad_alignment_start"], metrics["grad_alignment_end"], metrics["first_eval_step"]) == (2.0, 0.5, 50)
    assert [metrics[f"log_ratio_{key}"] for key in ("alignment", "alignment_vs_first", "uniformity")] == pytest.approx(
        [math.log(0.25), math.log(0.5 / 1.25), math.log(hook.GRAD_FLOOR)])  # a 0 counts as the floor
    assert hook.log_ratio(1.0, 0.0) is None and hook.log_ratio(None, 1.0) is None
    with pytest.raises(RuntimeError, match="not 0"):
        hook.gradient_summary({**curves, "steps": [50, 100, 150]})


def test_multitask_trains_on_seeded_shuffles_of_its_files_made_once_and_keeps_the_records_names(data_root, tmp_path):
    _, args, _, hook = _setup("multitask", tmp_path, "--data-root", str(data_root))
    prepared, target = hook.prepare(args), tmp_path / "runs" / "multitask" / "data"
    assert prepared.data_root == str(target) and args.data_root == str(data_root)  # the page keeps the root given
    for name in hook.SHUFFLED_FILES:
        original, shuffled = (data_root / name).read_text().splitlines(), (target / name).read_text().splitlines()
        assert shuffled[0] == original[0] and sorted(shuffled[1:]) == sorted(original[1:]) and shuffled != original
    assert (target / "nli" / "snli_devtest_for_simcse.csv").is_symlink()
    before = (target / hook.SHUFFLED_FILES[0]).stat().st_mtime_ns
    assert hook.prepare(args) and (target / hook.SHUFFLED_FILES[0]).stat().st_mtime_ns == before  # made once
    raw = {"minbert-sst_dev_accuracy": 31.0, "minbert-quora_dev_accuracy": 65.0, "minbert-sts_dev_pearson": 51.0}
    found = hook.metrics(None, {"metrics": raw, "last_step": 96, "report": {"tasks": {"minbert-sst": {"n_train": 400}}}}, None)
    assert [found[k] for k in ("sst_accuracy", "quora_accuracy", "sts_pearson", "steps", "n_train")] == [
        31.0, 65.0, 51.0, 96, {"minbert-sst": 400}]


def test_retrieval_prepares_the_beir_folder_once_and_reads_a_runs_training_cost(data_root, tmp_path):
    _, args, _, hook = _setup("retrieval", tmp_path, "--data-root", str(data_root))
    assert hook.prepare(args) is args
    manifest = json.loads((hook.folder(args) / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["source"] == str(hook.SOURCE) and manifest["queries"] == {"test": 1000, "dev": 500}
    before = (hook.folder(args) / "manifest.json").stat().st_mtime_ns
    assert hook.prepare(args) is args and (hook.folder(args) / "manifest.json").stat().st_mtime_ns == before
    log = [{"step": 10, "samples_per_s": 32.0}, {"step": 20, "samples_per_s": 64.0}, {"step": 30, "samples_per_s": 16.0}]
    (tmp_path / "train_log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in log))
    (tmp_path / "config.yaml").write_text("train:\n  batch_size: 64\n")
    (tmp_path / "metrics.json").write_text(json.dumps({"report": {"negatives": {"fill_s": 12.5}}}))
    assert hook.training_cost(tmp_path) == {"steps": 30, "s_per_step": 2.0, "negatives_report": {"fill_s": 12.5}}


BLOCK = """<!-- begin bench/reclaim_overhead.py{} -->
- date: 2026-01-02 03:00 UTC; top-K = 100 (K = 100)
| bank rows | negatives | search | ms/step | time vs baseline | peak MiB | + MiB |
|---:|---|---|---:|---:|---:|---:|
| 10 | in_batch | – | 101.0 | 1.010 | 1,200 | +200 |
| 10 | top-K | ivf (kept) | 125.0 | 1.250 | 1,350 | +350 |
| 1,000 | top-K | ivf (kept) | skipped: too big | – | – | – |
<!-- end bench/reclaim_overhead.py{} -->
"""


def test_reclaim_plain_arm_trains_like_reclaim_its_step_time_and_the_bench_blocks(tmp_path):
    experiment, args, _, hook = _setup("reclaim", tmp_path)
    runs = {(r.name, r.seed): r for r in run.plan(experiment, args)}
    for task in ("sst2", "mrpc", "rte"):  # scl at λ = 0 and reclaim agree on every train / data / eval key
        plain, top = (load_config(recipe_path(r.recipe), r.overrides[1:]).model_dump()
                      for r in (runs[(f"{task}/plain", 2)], runs[(f"{task}/top100", 2)]))
        top["data"]["few_shot_sampling"] = top["data"]["few_shot_sampling"] or "per_class"  # reclaim's own draw
        plain, top = ({**found, **found["method_args"]} for found in (plain, top))
        assert [plain[k] for k in ("train", "data", "eval", "pooling", "head_dropout")] == [
            top[k] for k in ("train", "data", "eval", "pooling", "head_dropout")]
    log = [{"step": s, "samples_per_s": r, "loss/ans": 3.0} for s, r in enumerate([1.0, 16.0, 8.0, 16.0, 8.0, 16.0], 1)]
    got = hook.timing(log, 40)  # 40 rows, batches of 32 and 8: step 1 slow (loader start); full 2 s, partial 0.5 s
    assert [got["steps"], got["train_s"], got["step_ms"]] == [6, 32 + 0.5 + 4 + 0.5 + 4 + 0.5, 4000.0]  # ms: steps 3, 5
    assert hook.step_sizes(40, 32, 6) == [32, 8] * 3
    assert hook.loss_at_end(log, "loss/ans") == 3.0 and hook.loss_at_end(log, "loss/ce") is None
    path = tmp_path / "BENCHMARKS.md"
    assert hook.bench_overhead(path)["status"] == "missing"
    assert hook.bench_numbers(path) == "bench overhead: no BENCHMARKS.md block"
    path.write_text(BLOCK.format("", ""), encoding="utf-8")
    found = hook.bench_overhead(path)
    assert [found[key] for key in ("status", "date", "k", "in_batch_mib")] == ["ok", "2026-01-02 03:00 UTC", "100", ["+200"]]
    assert found["rows"] == [{"bank_rows": "10", "time_pct": pytest.approx(25.0), "extra_mib": "+350"}]
    assert hook.bench_numbers(path) == "bench top-K: +25 % at 10 rows; memory +350 MiB at 10"
    paired = " " + hook.INTERLEAVED[0]
    path.write_text(BLOCK.format("", "") + BLOCK.format(paired, paired).replace("1.250", "1.125"), encoding="utf-8")
    assert hook.bench_overhead(path, paired.strip())["rows"][0]["time_pct"] == pytest.approx(12.5)
    assert hook.bench_numbers(path).startswith("bench top-K: +12 % at 10 rows paired in time")
    large = " " + hook.INTERLEAVED[1]  # a second paired block (1M rows): its rows follow, each size read once
    path.write_text(path.read_text() + BLOCK.format(large, large).replace("| 10 |", "| 20 |"), encoding="utf-8")
    assert [row["bank_rows"] for row in hook.paired_overhead(path)["rows"]] == ["10", "20"]
    assert hook.bench_numbers(path).startswith("bench top-K: +12 % at 10 rows paired in time, +25 % at 20 rows paired")
    path.write_text(BLOCK.format("", "").replace("ivf (kept)", "flat"), encoding="utf-8")
    assert hook.bench_overhead(path)["status"] == "no top-K rows"


def test_gd_mechanism_applies_the_declared_fade_rule_and_measures_a_tiny_model_through_the_runner(
        make_tiny_bert, data_root, tmp_path):
    experiment, args, _, gd = _setup("gd_mechanism", tmp_path, "--data-root", str(data_root), "--pairs", "32",
                                     "--batch", "16", "--bins", "4")
    three = lambda bottom, top: [{"median": bottom}, {"median": 1.0}, {"median": top}]  # noqa: E731
    assert [gd.fade_verdict(three(*ends))[1] for ends in ((1.0, 0.099), (1.0, 0.1), (0.0, 1.0))] == [
        "fades", "does not fade", "no gradient"]  # the top bin's median under 0.10 of the bottom's
    item = run.plan(experiment, args)[0]
    item.overrides.append(f"model={make_tiny_bert()}")
    metrics, _ = gd.measure(item, args)
    assert set(metrics["losses"]) == set(objectives_taking("pairs")) and metrics["cpu_s"] > 0
    assert metrics["settings"]["objectives"]["infonce"]["options"]["temperature"] == 0.05
    assert metrics["losses"]["infonce"]["bins"][0]["n"] == 8 and (tmp_path / "gd_mechanism.png").stat().st_size > 10_000
