"""SimCSE from all-MiniLM-L6-v2: unsupervised and supervised, [CLS] and mean pooling, STS before and after.

Gao, Yao & Chen, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", EMNLP 2021. The paper trains
bert-base-uncased ([CLS] + MLP) with dropout twins (unsupervised, wiki1m) or NLI triplets with the
contradiction as a hard negative (supervised) and reports better STS than the starting encoder, and supervised
above unsupervised. This runs the two recipes (``recipes/simcse-unsup.yaml``, ``recipes/simcse-sup.yaml``) from
the recipes' model, all-MiniLM-L6-v2, with ``method_args.pooling`` cls or mean, and scores STS-B dev, SICK-R dev
(SICK_trial) and STS12 (test, the subsets concatenated: SimCSE's "all") before and after training.

Settings (``setting``, ``seed``):

- ``before/cls``, ``before/mean`` (seed 0): the starting encoder with that pooling and no MLP, evaluated once.
  Deterministic (eval mode: no dropout, nothing random is built), so one evaluation stands for every seed.
- ``unsup/cls``, ``unsup/mean``, ``sup/cls``, ``sup/mean`` x ``--seeds`` (1 2 3): one training each, the seed
  fixing the new MLP's initialisation, the data order and the dropout masks. The recipes' MLP rule is kept for
  both poolings: unsupervised ``mlp: train`` (SimCSE's ``--mlp_only_train``: the saved embedding has no MLP),
  supervised ``mlp: always`` (the MLP is part of the saved embedding).

Every training run evaluates ONCE, at its last step (``train.eval_every`` = ``train.save_every`` = the number
of steps); ``train.metric_for_best`` stays the recipes' ``stsb_dev_spearman`` but has a single candidate, so
the reported weights are the final-step weights (checked: ``selected_step == last_step``). No choice is made
on STS-B dev, the set that is also reported. (``metric_for_best: null`` would give the same weights but the
library then evaluates the final weights a second time: +22 s a run.)

Defaults (their cost on 2 quiet cores: the reference estimate of ``experiments/cost.py``, stated in the report):

- unsupervised: 100 steps x 64 sentences (6,400 of the 11,914-sentence wiki1m head), each encoded twice;
- supervised: 40 steps x 128 triplets (5,120 of the 5,883 SNLI dev+test triplets);
- one evaluation: STS-B dev 3,000 + SICK-R dev 1,000 + STS12 6,216 sentences;
- 2 evaluations + 6 unsupervised and 6 supervised trainings, each with one evaluation, a model load and a save.

The paper: 10^6 wiki1m sentences for one epoch at batch 64 (unsupervised) and 275k SNLI+MNLI triplets for 3
epochs at batch 512 (supervised), evaluated every 125 steps with selection on STS-B dev.

Outputs in ``--results``: ``simcse.json`` (one record per run), ``simcse.md`` (the RESULTS.md section) and
``simcse.png`` (grouped bars). Run folders go under ``--runs``/simcse and are deleted once a run's metrics are
recorded.

Example::

    .venv/bin/python experiments/simcse.py --data-root ../shared/data --budget-minutes 60
    .venv/bin/python experiments/simcse.py --report-only
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import shutil
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost  # noqa: E402
import harness  # noqa: E402

NAME = "simcse"
RECIPES = {"unsup": "simcse-unsup", "sup": "simcse-sup"}
POOLINGS = ("cls", "mean")
KINDS = ("unsup", "sup")
BEFORE_SEED = 0
EVAL_TASKS = ("stsb:dev", "sickr:dev", "sts12")
AVERAGE = "avg3_spearman"
BENCHMARKS = (
    ("stsb_dev_spearman", "STS-B dev"),
    ("sickr_dev_spearman", "SICK-R dev"),
    ("sts12_test_spearman", "STS12 (all)"),
    (AVERAGE, "mean of the 3"),
)
EVAL_SENTENCES = {"stsb:dev": (1500, 2), "sickr:dev": (500, 2), "sts12": (3108, 2)}  # pairs, sentences a pair
PAPER = {"unsup": 76.25, "sup": 81.57}  # STS avg., BERT-base (docs/methods/simcse-unsup.md, simcse-sup.md)

DEFAULTS = {
    "seeds": [1, 2, 3],
    "unsup_steps": 100,
    "unsup_batch_size": 64,
    "sup_steps": 40,
    "sup_batch_size": 128,
    "max_length": 32,
    "eval_batch_size": 128,
    "eval_limit": None,
    "train_limit": None,
}
SIZE_FLAGS = {
    "unsup_steps": "--unsup-steps",
    "unsup_batch_size": "--unsup-batch-size",
    "sup_steps": "--sup-steps",
    "sup_batch_size": "--sup-batch-size",
    "max_length": "--max-length",
    "eval_batch_size": "--eval-batch-size",
    "eval_limit": "--eval-limit",
    "train_limit": "--train-limit",
}


# ------------------------------------------------------------------------------------------------ the plan


def setting_name(kind: str, pooling: str) -> str:
    return f"{kind}/{pooling}"


def before_name(pooling: str) -> str:
    return f"before/{pooling}"


TRAINED = [setting_name(kind, pooling) for kind in KINDS for pooling in POOLINGS]
BEFORE = [before_name(pooling) for pooling in POOLINGS]


def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """The two before-evaluations, then every trained setting seed by seed (a partial sitting stays balanced)."""
    return [(name, BEFORE_SEED) for name in BEFORE] + [
        (name, int(seed)) for seed in args.seeds for name in TRAINED
    ]


def parse_setting(setting: str) -> tuple[str, str]:
    """``"unsup/cls"`` -> ``("unsup", "cls")``; ``"before/mean"`` -> ``("before", "mean")``."""
    kind, _, pooling = setting.partition("/")
    if kind not in (*KINDS, "before") or pooling not in POOLINGS:
        raise ValueError(f"unknown setting {setting!r}")
    return kind, pooling


def _eval_overrides(args: argparse.Namespace) -> list[str]:
    sets = [f"eval.tasks=[{','.join(EVAL_TASKS)}]", f"eval.batch_size={args.eval_batch_size}"]
    if args.eval_limit is not None:
        sets.append(f"eval.limit={args.eval_limit}")
    return sets


def recipe_of(setting: str) -> str:
    kind, _ = parse_setting(setting)
    return RECIPES["unsup" if kind == "before" else kind]


def overrides(args: argparse.Namespace, setting: str, seed: int) -> list[str]:
    """The ``--set`` overrides of one run over its recipe (``recipe_of(setting)``)."""
    kind, pooling = parse_setting(setting)
    if kind == "before":  # the encoder the recipe would train, without the (new, random) MLP
        return [
            f"output_dir={Path(args.runs) / NAME / 'before'}",
            f"method_args.pooling={pooling}",
            "method_args.mlp=none",
            *_eval_overrides(args),
        ]
    steps = args.unsup_steps if kind == "unsup" else args.sup_steps
    batch = args.unsup_batch_size if kind == "unsup" else args.sup_batch_size
    sets = [
        f"output_dir={Path(args.runs) / NAME / f'{kind}-{pooling}' / f'seed-{seed}'}",
        f"seed={seed}",
        f"method_args.pooling={pooling}",
        f"method_args.mlp={'train' if kind == 'unsup' else 'always'}",  # the recipes' rule, both poolings
        f"train.max_steps={steps}",
        f"train.batch_size={batch}",
        f"data.max_length={args.max_length}",
        f"train.eval_every={steps}",  # one evaluation, at the last step
        f"train.save_every={steps}",
        "train.metric_for_best=stsb_dev_spearman",  # one candidate: the final step (see the docstring)
        "train.keep_last=1",
        "train.overwrite=true",
        "train.progress_bar=false",
        "train.report_to=none",
        *_eval_overrides(args),
    ]
    if args.train_limit is not None:
        sets.append(f"data.limit={args.train_limit}")
    return sets


def load_run_config(args: argparse.Namespace, setting: str, seed: int):
    from contrastext import load_config, recipe_path

    return load_config(recipe_path(recipe_of(setting)), overrides(args, setting, seed))


def _comparable(sets: list[str]) -> list[str]:
    """Overrides without the run folder (which follows --runs, not the experiment)."""
    return [s for s in harness.renamed_keys(sets) if not s.startswith("output_dir=")]


def check_records(store: harness.RecordStore, args: argparse.Namespace) -> list[str]:
    """Records of this plan made with other sizes than ``args`` (they would be skipped and mixed in)."""
    wrong = []
    for setting, seed in plan(args):
        record = store.get(setting, seed)
        if record is None:
            continue
        recorded = _comparable(record.get("config", {}).get("overrides", []))
        if recorded != _comparable(overrides(args, setting, seed)):
            wrong.append(f"{setting} seed {seed}")
    return wrong


# ------------------------------------------------------------------------------------------------ estimates


def eval_seconds(args: argparse.Namespace) -> float:
    limit = args.eval_limit
    return cost.encode_seconds(sum(
        (pairs if limit is None else min(pairs, limit)) * per_pair for pairs, per_pair in EVAL_SENTENCES.values()))


def reference_seconds(args: argparse.Namespace, setting: str) -> float:
    """Seconds of one run on 2 quiet cores by the cost model (``experiments/cost.py``)."""
    kind, _ = parse_setting(setting)
    if kind == "before":
        return cost.LOAD_S + eval_seconds(args)
    if kind == "unsup":  # dropout twins: every sentence encoded twice
        train = cost.train_seconds(2 * args.unsup_steps * args.unsup_batch_size, cost.tokens("wiki1m", args.max_length))
    else:  # sentence, entailment, contradiction
        train = cost.train_seconds(3 * args.sup_steps * args.sup_batch_size, cost.tokens("nli", args.max_length))
    return cost.LOAD_S + train + eval_seconds(args) + cost.SAVE_S


# ------------------------------------------------------------------------------------------------- the runs


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def keep_metrics(evaluated: dict) -> dict:
    """The Spearman / Pearson of the three benchmarks (x100) and their mean; None for a non-finite value."""
    metrics = {}
    for key, _ in BENCHMARKS[:3]:
        for name in (key, key.replace("_spearman", "_pearson")):
            if name not in evaluated:
                raise KeyError(f"the evaluation lacks {name}; it gave {', '.join(sorted(evaluated))}")
            metrics[name] = _finite(evaluated[name])
    values = [metrics[key] for key, _ in BENCHMARKS[:3]]
    metrics[AVERAGE] = statistics.fmean(values) if None not in values else None
    return metrics


def evaluate_before(args: argparse.Namespace, setting: str) -> dict:
    """The starting encoder with the setting's pooling, no MLP, scored by the recipe's own evaluator."""
    from contrastext.runs.evaluation import sentence_evaluator
    from contrastext.runs.simcse import SimCSEUnsupArgs, sentence_encoder

    config = load_run_config(args, setting, BEFORE_SEED)
    encoder = sentence_encoder(config, config.method_args_as(SimCSEUnsupArgs))
    evaluator = sentence_evaluator(config, Path(args.data_root))
    return keep_metrics(evaluator(SimpleNamespace(encoder=encoder)))


def train(args: argparse.Namespace, setting: str, seed: int) -> dict:
    """One recipe run; the final-step metrics, the steps and the last logged training loss."""
    from contrastext import read_log, run_recipe

    config = load_run_config(args, setting, seed)
    summary = run_recipe(config, data_root=Path(args.data_root))
    if summary["best_step"] != summary["last_step"]:
        raise RuntimeError(
            f"{setting} seed {seed}: the reported weights are of step {summary['best_step']}, not the last "
            f"step {summary['last_step']}: the run evaluated more than once"
        )
    metrics = keep_metrics(summary["metrics"])
    losses = [r["loss"] for r in read_log(summary["log_path"]) if r.get("loss") is not None]
    metrics["last_step"] = int(summary["last_step"])
    metrics["selected_step"] = int(summary["best_step"])
    metrics["final_train_loss"] = _finite(losses[-1]) if losses else None
    output = Path(config.output_dir)
    if output.is_dir():
        shutil.rmtree(output)  # checkpoints and weights: the metrics are all this experiment keeps
    with contextlib.suppress(OSError):  # the setting's folder, once its last seed is gone
        output.parent.rmdir()
    return metrics


def run_one_factory(args: argparse.Namespace):
    """``run_one(setting, seed) -> (config, metrics)`` for harness.run_plan."""

    def run_one(setting: str, seed: int) -> tuple[dict, dict]:
        kind, _ = parse_setting(setting)
        metrics = evaluate_before(args, setting) if kind == "before" else train(args, setting, seed)
        config = {
            "recipe": recipe_of(setting),
            "overrides": overrides(args, setting, seed),
            "evaluation_only": kind == "before",
            "data_root": str(args.data_root),
        }
        return config, metrics

    return run_one


# ------------------------------------------------------------------------------------------------ statistics


def values_with_before(store: harness.RecordStore):
    """``values(setting, key)`` for harness.compare: a before-setting's single value stands for every seed."""
    seeds = sorted({r["seed"] for r in store.records if not r["setting"].startswith("before/")})

    def values(setting: str, key: str) -> dict[int, float]:
        if setting.startswith("before/"):
            found = store.values(setting, key)
            if BEFORE_SEED not in found:
                return {}
            return {seed: found[BEFORE_SEED] for seed in seeds}
        return store.values(setting, key)

    return values


_COMPARISONS: dict[tuple, harness.Comparison] = {}


def _compare(store: harness.RecordStore, treatment: str, baseline: str, key: str, values=None) -> harness.Comparison:
    """harness.compare, remembered by the values compared (a report asks for the same comparison several times
    and each one bootstraps 10,000 resamples)."""
    read = values or store.values
    signature = (treatment, baseline, key, tuple(sorted(read(treatment, key).items())),
                 tuple(sorted(read(baseline, key).items())))
    if signature not in _COMPARISONS:
        _COMPARISONS[signature] = harness.compare(store, treatment, baseline, key, direction=1, values=values)
    return _COMPARISONS[signature]


def after_vs_before(store: harness.RecordStore, setting: str, key: str) -> harness.Comparison:
    """Trained setting vs the starting encoder with the same pooling (paper's direction: after > before)."""
    _, pooling = parse_setting(setting)
    return _compare(store, setting, before_name(pooling), key, values=values_with_before(store))


def sup_vs_unsup(store: harness.RecordStore, pooling: str, key: str) -> harness.Comparison:
    """Supervised vs unsupervised, paired by seed (paper's direction: supervised > unsupervised)."""
    return _compare(store, setting_name("sup", pooling), setting_name("unsup", pooling), key)


def _interval(comparison: harness.Comparison) -> str:
    if not comparison.seeds:
        return "–"
    if len(comparison.seeds) < 2:
        return f"{comparison.mean_difference:+.2f} (n = 1)"
    return (
        f"{comparison.mean_difference:+.2f} [{comparison.low:+.2f}, {comparison.high:+.2f}] "
        f"(n = {len(comparison.seeds)})"
    )


# --------------------------------------------------------------------------------------------------- report


def runs_done(store: harness.RecordStore, args: argparse.Namespace) -> tuple[int, int]:
    full = plan(args)
    return sum(store.has(s, seed) for s, seed in full), len(full)


def _cell(store: harness.RecordStore, setting: str, key: str) -> str:
    return harness.fmt_mean_std(list(store.values(setting, key).values()))


def results_table(store: harness.RecordStore) -> str:
    headers = ["setting", *[label for _, label in BENCHMARKS], "paper (STS avg., 7 test sets, BERT-base)"]
    rows = []
    for pooling in POOLINGS:
        for setting in (before_name(pooling), setting_name("unsup", pooling), setting_name("sup", pooling)):
            kind, _ = parse_setting(setting)
            if kind == "before":
                paper = "–"
            elif pooling == "cls":
                paper = f"{PAPER[kind]:.2f}"
            else:
                paper = "– (the paper's runs use [CLS])"
            rows.append([f"`{setting}`", *[_cell(store, setting, key) for key, _ in BENCHMARKS], paper])
    return harness.markdown_table(headers, rows)


def delta_table(store: harness.RecordStore) -> str:
    headers = ["comparison", *[label for _, label in BENCHMARKS]]
    rows = []
    for setting in TRAINED:
        _, pooling = parse_setting(setting)
        cells = [_interval(after_vs_before(store, setting, key)) for key, _ in BENCHMARKS]
        rows.append([f"`{setting}` − `{before_name(pooling)}`", *cells])
    for pooling in POOLINGS:
        cells = [_interval(sup_vs_unsup(store, pooling, key)) for key, _ in BENCHMARKS]
        rows.append([f"`sup/{pooling}` − `unsup/{pooling}`", *cells])
    return harness.markdown_table(headers, rows)


def per_seed_table(store: harness.RecordStore) -> str:
    seeds = sorted({r["seed"] for r in store.records if not r["setting"].startswith("before/")})
    headers = ["setting", *[f"seed {s}" for s in seeds]]
    rows = []
    for setting in TRAINED:
        found = store.values(setting, "stsb_dev_spearman")
        rows.append([f"`{setting}`", *[f"{found[s]:.2f}" if s in found else "–" for s in seeds]])
    return harness.markdown_table(headers, rows) if seeds else "(no trained run yet)\n"


def verdict_lines(store: harness.RecordStore) -> list[str]:
    lines = []
    for setting in TRAINED:
        comparison = after_vs_before(store, setting, AVERAGE)
        stsb = after_vs_before(store, setting, "stsb_dev_spearman")
        if not comparison.seeds:
            lines.append(f"**Verdict:** `{setting}` after > before: no runs yet.")
            continue
        lines.append(
            f"**Verdict:** `{setting}` after > before (mean Spearman of the 3 benchmarks): {comparison.text()}; "
            f"STS-B dev alone: Δ {_interval(stsb)} → {stsb.verdict}."
        )
    for pooling in POOLINGS:
        comparison = sup_vs_unsup(store, pooling, AVERAGE)
        if not comparison.seeds:
            lines.append(f"**Verdict:** supervised > unsupervised with {pooling} pooling: no paired runs yet.")
            continue
        lines.append(
            f"**Verdict:** supervised > unsupervised with {pooling} pooling (mean of the 3): {comparison.text()}."
        )
    return lines


def _size_extra(args: argparse.Namespace) -> str:
    parts = []
    if [int(s) for s in args.seeds] != DEFAULTS["seeds"]:
        parts.append("--seeds " + " ".join(str(s) for s in args.seeds))
    for attribute, flag in SIZE_FLAGS.items():
        value = getattr(args, attribute)
        if value != DEFAULTS[attribute]:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def report(store: harness.RecordStore, args: argparse.Namespace) -> str:
    """The section of docs/RESULTS.md."""
    done, total = runs_done(store, args)
    before_note = (
        "`before/cls` and `before/mean` are the starting all-MiniLM-L6-v2 with that pooling and no MLP, evaluated "
        "once (recorded as seed 0): encoding is deterministic (eval mode, no dropout, nothing random built), so "
        "the one value is the baseline of every seed, and the interval is a one-sample bootstrap of the per-seed "
        "after − before differences. The supervised recipe keeps its new MLP at inference (`mlp: always`), so "
        "`sup/*` compares the model the recipe saves with the starting encoder; the unsupervised recipe's MLP is "
        "for training only, so `unsup/*` and `before/*` embed the same way."
    )
    text = [
        "## SimCSE: unsupervised and supervised SimCSE from all-MiniLM-L6-v2, [CLS] and mean pooling",
        "",
        "Gao, Yao & Chen, *SimCSE: Simple Contrastive Learning of Sentence Embeddings*, EMNLP 2021.",
        "",
        "**Claim (a paraphrase in our words, not a quotation:** the paper's text is not in the project's paper "
        "folder and docs/methods/simcse-unsup.md / simcse-sup.md cite no sentence of it**):** training a "
        "pre-trained encoder with SimCSE's contrastive objective, unsupervised (the same sentence encoded twice "
        "with different dropout masks is the positive) or supervised (NLI entailment pairs as positives, "
        "contradictions as hard negatives), gives sentence embeddings that score better on STS than the starting "
        "encoder, and the supervised variant scores above the unsupervised one.",
        "",
        "The paper's numbers (as given in docs/methods/simcse-unsup.md and simcse-sup.md; the paper's per-task "
        "STS-B dev, SICK-R and STS12 figures are not in our docs, so none is given here):",
        "",
        harness.markdown_table(
            ["variant", "model", "training data", "batch, lr, length, epochs", "STS avg. (Spearman ×100)"],
            [
                ["unsupervised", "bert-base-uncased, [CLS] + MLP in training only", "wiki1m, 10⁶ sentences",
                 "64, 3e-5, 32, 1", "76.25"],
                ["supervised", "bert-base-uncased, [CLS] + MLP kept", "SNLI + MNLI, 275k triplets",
                 "512, 5e-5, 32, 3", "81.57"],
            ],
        ),
        "The paper's average is over the seven STS test sets of its Table 1 (STS12–16, STS-B test, SICK-R test); "
        "our data root has STS12 test and the STS-B / SICK-R dev splits only, so our numbers are on other sets.",
        "",
        "### Protocol",
        "",
        harness.markdown_table(
            ["", "paper", "here"],
            [
                ["model", "bert-base-uncased (also RoBERTa)",
                 "all-MiniLM-L6-v2 (6 layers, 384 wide), already sentence-tuned with mean pooling on 1B pairs"],
                ["pooling", "[CLS] (+ MLP)", "`method_args.pooling` cls or mean, MLP rule of the recipes for both: "
                 "unsupervised `mlp: train`, supervised `mlp: always`"],
                ["unsupervised data, steps", "wiki1m 10⁶ sentences, 1 epoch, batch 64",
                 f"wiki1m head (11,914 sentences), {args.unsup_steps} steps × {args.unsup_batch_size} sentences"],
                ["supervised data, steps", "275k SNLI+MNLI triplets, 3 epochs, batch 512",
                 f"5,883 SNLI dev+test triplets, {args.sup_steps} steps × {args.sup_batch_size} triplets"],
                ["lr, τ, length", "3e-5 (unsup) / 5e-5 (sup), 0.05, 32",
                 f"the recipes' (3e-5 / 5e-5, 0.05), length {args.max_length}"],
                ["model selection", "STS-B dev every 125 steps, best checkpoint kept",
                 "one evaluation at the last step: the reported weights are the final ones (no selection)"],
                ["evaluation", "7 STS test sets, STS12–16 with the subsets concatenated (\"all\")",
                 "STS-B dev (1,500 pairs), SICK-R dev (SICK_trial, 500), STS12 test (3,108, \"all\")"
                 + (f"; first {args.eval_limit} pairs only (smoke size)" if args.eval_limit else "")],
                ["seeds", "—", f"{len(args.seeds)} per setting ({', '.join(str(s) for s in args.seeds)}); "
                 "the issue asks 3, fewer than the 5 of the experiments' rule"],
            ],
        ),
        f"Why the sizes: the plan ({len(plan(args)) - len(BEFORE)} trainings and {len(BEFORE)} evaluations) is "
        f"estimated at {cost.plan_minutes(reference_seconds, args, plan(args)):.0f} minutes on 2 quiet CPU cores "
        "by the cost model of `experiments/cost.py`; the experiments' limit is 90 minutes, and the paper trains for "
        "thousands of GPU steps. What starting from all-MiniLM-L6-v2 implies: the model was already trained as a sentence "
        "encoder (mean pooling, 1B pairs, NLI-style data among them), so its mean-pooled embedding is already "
        "strong and a short SimCSE run from it tests whether the objective keeps or erodes that, not whether it "
        "turns a raw language model into a sentence encoder as in the paper; its [CLS] embedding was never "
        "trained as the sentence vector and starts weaker, which is closer to the paper's situation.",
        "",
        "Model selection: the recipes keep the checkpoint with the best STS-B dev Spearman (`metric_for_best: "
        "stsb_dev_spearman`), which would choose on a set we also report. Here each run evaluates once, at its "
        "last step, so the selection has a single candidate and the reported numbers are the final-step "
        "weights (every record has `selected_step == last_step`).",
        "",
        before_note,
        "",
        f"### Results (Spearman ×100, mean ± std (n) over seeds; {done}/{total} runs)",
        "",
        results_table(store),
        "After − before, and supervised − unsupervised: mean Δ [95 % bootstrap interval] (n seeds). With n ≤ 3 "
        "the percentile interval's ends are the smallest and largest difference, so it excludes 0 exactly when "
        "every seed's difference has the same sign: a coarse test, and no evidence about runs of the paper's "
        "length.",
        "",
        delta_table(store),
        "STS-B dev per seed:",
        "",
        per_seed_table(store),
        *[line + "\n" for line in verdict_lines(store)],
        f"![SimCSE before and after, per benchmark]({NAME}.png)",
        "",
        f"Command: `{harness.command(NAME, args, _size_extra(args))}`",
    ]
    return "\n".join(text)


def summary(store: harness.RecordStore, args: argparse.Namespace | None = None) -> dict:
    """The line of the README / RESULTS summary table."""
    args = args or default_args()
    done, total = runs_done(store, args)
    parts = []
    for setting in TRAINED:
        comparison = after_vs_before(store, setting, AVERAGE)
        parts.append(f"{setting} {comparison.verdict if comparison.seeds else 'no runs'}")
    sup = [f"sup>unsup {p}: {sup_vs_unsup(store, p, AVERAGE).verdict}" for p in POOLINGS]
    verdict = "after>before (mean of 3 STS): " + ", ".join(parts) + "; " + ", ".join(sup)
    if done < total:
        verdict = f"partial: {done}/{total} runs; " + verdict
    numbers = []
    for pooling in POOLINGS:
        cells = []
        for setting in (before_name(pooling), setting_name("unsup", pooling), setting_name("sup", pooling)):
            found = list(store.values(setting, "stsb_dev_spearman").values())
            cells.append(f"{statistics.fmean(found):.2f}" if found else "–")
        numbers.append(f"{pooling}: {cells[0]} → unsup {cells[1]} / sup {cells[2]}")
    return {
        "paper": "SimCSE (Gao, Yao & Chen, EMNLP 2021)",
        "claim": "SimCSE training improves STS over the starting encoder; supervised > unsupervised (paraphrase)",
        "verdict": verdict,
        "numbers": "STS-B dev Spearman before → after, " + "; ".join(numbers),
    }


# ------------------------------------------------------------------------------------------------------ plot


def plot(store: harness.RecordStore, path: Path) -> Path:
    """Grouped bars per benchmark: before, unsupervised, supervised for each pooling; std error bars, seeds as dots."""
    plt = harness.pyplot()
    figure, axes = plt.subplots(1, len(BENCHMARKS), figsize=(4.2 * len(BENCHMARKS), 4.2), squeeze=False)
    series = (("before", "#9e9e9e"), ("unsup", "#1f77b4"), ("sup", "#ff7f0e"))
    width = 0.26
    for axis, (key, label) in zip(axes[0], BENCHMARKS, strict=True):
        seen: list[float] = []
        for offset, (kind, color) in enumerate(series):
            for position, pooling in enumerate(POOLINGS):
                setting = before_name(pooling) if kind == "before" else setting_name(kind, pooling)
                found = list(store.values(setting, key).values())
                x = position + (offset - 1) * width
                if not found:
                    axis.text(x, 0.02, "–", ha="center", transform=axis.get_xaxis_transform())
                    continue
                mean, std = harness.mean_std(found)
                seen.extend(found)
                axis.bar(x, mean, width, yerr=std if len(found) > 1 else None, color=color, capsize=3,
                         label=kind if position == 0 else None)
                axis.scatter([x] * len(found), found, s=9, color="black", zorder=3)
        if seen:
            low, high = min(seen), max(seen)
            axis.set_ylim(max(0.0, low - 5), min(100.0, high + 3))
        axis.set_xticks(range(len(POOLINGS)), ["[CLS]" if p == "cls" else "mean" for p in POOLINGS])
        axis.set_title(label)
        axis.set_ylabel("Spearman ×100")
        axis.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if not handles:
        for axis in axes[0]:
            handles, labels = axis.get_legend_handles_labels()
            if handles:
                break
    names = {"before": "before (starting model)", "unsup": "after unsup. SimCSE", "sup": "after sup. SimCSE"}
    if handles:
        figure.legend(handles, [names[label] for label in labels], loc="upper center", ncol=3, frameon=False)
    figure.text(0.5, 0.01, "SimCSE from all-MiniLM-L6-v2: before vs after (bars: mean, whiskers: std over seeds, "
                "dots: seeds)", ha="center", va="bottom", fontsize=9)
    figure.tight_layout(rect=(0, 0.07, 1, 0.92))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


# ------------------------------------------------------------------------------------------------------ main


def build_parser() -> argparse.ArgumentParser:
    p = harness.parser(__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=DEFAULTS["seeds"], help="seeds of the trained settings")
    p.add_argument("--unsup-steps", type=int, default=DEFAULTS["unsup_steps"])
    p.add_argument("--unsup-batch-size", type=int, default=DEFAULTS["unsup_batch_size"], help="sentences a step")
    p.add_argument("--sup-steps", type=int, default=DEFAULTS["sup_steps"])
    p.add_argument("--sup-batch-size", type=int, default=DEFAULTS["sup_batch_size"], help="triplets a step")
    p.add_argument("--max-length", type=int, default=DEFAULTS["max_length"], help="tokens a training sentence")
    p.add_argument("--eval-batch-size", type=int, default=DEFAULTS["eval_batch_size"])
    p.add_argument("--eval-limit", type=int, default=DEFAULTS["eval_limit"],
                   help="first N pairs of each evaluation set (eval.limit): smoke tests only")
    p.add_argument("--train-limit", type=int, default=DEFAULTS["train_limit"],
                   help="first N training examples (data.limit): smoke tests only")
    return p


def default_args() -> argparse.Namespace:
    return build_parser().parse_args([])


def quiet_progress_bars() -> None:
    """No tqdm bars from transformers / huggingface_hub while weights are loaded and saved (logs stay readable)."""
    with contextlib.suppress(Exception):
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    with contextlib.suppress(Exception):
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet_progress_bars()
    store = harness.RecordStore(NAME, args.results)
    wrong = check_records(store, args)
    if wrong:
        message = (
            f"{store.path}: {len(wrong)} record(s) were made with other sizes or options than this command "
            f"({', '.join(wrong[:4])}{'…' if len(wrong) > 4 else ''}): give the same options, or another --results"
        )
        if not args.report_only:
            raise SystemExit(message)
        print("warning: " + message, flush=True)
    left = 0
    if not args.report_only:
        minutes = cost.plan_minutes(reference_seconds, args, plan(args))
        print(f"[{NAME}] plan: {len(plan(args))} runs, estimated {minutes:.1f} min on 2 quiet cores", flush=True)
        reference = functools.partial(reference_seconds, args)
        budget = harness.Budget(args.budget_minutes)
        left = harness.run_plan(store, plan(args), run_one_factory(args), budget, reference)
    path = harness.write_report(store, report(store, args))
    plot(store, Path(args.results) / f"{NAME}.png")
    print(f"[{NAME}] wrote {path} and {Path(args.results) / f'{NAME}.png'}" + (f"; {left} run(s) left" if left else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
