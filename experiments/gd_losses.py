"""Gradient dissipation (Nie, Zhang & Mao, ICLR 2023): the seven objectives of the ``gd`` recipe, 3 seeds each.

"On the inadequacy of optimizing alignment and uniformity in contrastive learning of sentence representations".
The paper's claims tested here (quoted in the report): InfoNCE's gradient "quickly drops and vanishes" during
training while that of the decoupled losses (alignment + uniformity, DCL) does not, and losses built to
dissipate their gradient (the margin losses of the authors' code) give "the same or even better performance
than contrastive loss on the STS tasks".

Plan at the defaults: 7 losses (infonce, align_uniform, dcl, hinged_dcl, margin_euclidean, margin_angle,
margin_product) × seeds 1, 2, 3 = 21 runs of the ``gd`` recipe (unsupervised SimCSE on the wiki1m head,
[CLS] + MLP in training only, all-MiniLM-L6-v2), each 500 steps at batch 16, max length 32, lr 1e-5 (the
recipe's), linear decay, no checkpoint selection (the last weights are scored). Every 50 steps (and at step 0)
the run logs the alignment and uniformity parts of the objective's gradient on a FIXED batch of 16 dropout
twins (the first 16 training sentences; ``contrastext/runs/gd.py``: ``gradient_metrics``) and STS-B dev
Spearman on its first 200 pairs (cheap; ``eval.limit`` applies to every evaluation set of a run). After the
run this script scores the saved final encoder (``final/encoder``) on the FULL STS-B dev (1,500 pairs) and
SICK-R dev (500 pairs) through the public API (``TextEncoder.load`` + ``evaluation.suite.evaluate_tasks``),
after checking that this reloaded encoder reproduces the run's own last (200-pair) STS-B score. One extra
measurement, ``start`` (seed 0), scores the untrained encoder ([CLS], as the runs score theirs, and the model's
own mean pooling) on the same full sets. Seeds run seed-major (every loss at seed 1, then seed 2, ...), so a
partial sitting still gives paired comparisons.

Estimated time at the defaults on 2 quiet cores: the cost model of ``experiments/cost.py`` (training 500 steps
× 32 sequences, each sentence encoded twice; 11 evaluations of 400 STS sentences and the diagnostic batch; the
final evaluation; loads and saves), stated in the report. On a shared machine expect several times that:
``--budget-minutes`` stops and the next call goes on.

Outputs in ``--results``: ``gd_losses.json`` (run records: the gradient curves as lists, the final full-set
scores), ``gd_losses.md`` (the RESULTS.md section), ``gd_losses.png`` (2 × 2 panels). Run folders go under
``--runs``/gd_losses and are deleted once a run is recorded (``--keep-runs`` keeps them).

Example::

    .venv/bin/python experiments/gd_losses.py --data-root ../shared/data --budget-minutes 90
    .venv/bin/python experiments/gd_losses.py --report-only          # table + plot from the records
"""

from __future__ import annotations

import argparse
import functools
import math
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost  # noqa: E402
import harness  # noqa: E402

NAME = "gd_losses"
RECIPE = "gd"
LOSSES = ("infonce", "align_uniform", "dcl", "hinged_dcl", "margin_euclidean", "margin_angle", "margin_product")
MARGINS = ("margin_euclidean", "margin_angle", "margin_product")
DECOUPLED = ("align_uniform", "dcl")
BASELINE = "infonce"
# The direction of each loss's gradient over training: the paper's (InfoNCE, "decoupled" losses), the issue's
# reading of the paper's "new loss functions" (margin losses), and ours for hinged DCL (see PAPER_NOTE).
EXPECTED = {
    "infonce": "fades",
    "align_uniform": "does not fade",
    "dcl": "does not fade",
    "hinged_dcl": "fades (our reading)",
    "margin_euclidean": "fades",
    "margin_angle": "fades",
    "margin_product": "fades",
}
FADING = ("infonce", *MARGINS)  # the fading losses the verdict (a) is about
SEEDS = (1, 2, 3)
START = "start"  # the untrained encoder, measured once (seed 0)
START_SEED = 0
PARTS = ("alignment", "uniformity")
GRAD_FLOOR = 1e-8  # a gradient norm of exactly 0 (every margin met) counts as this in ratios and log plots
HALVING = 0.5  # the strict reading of "fades": the end/start ratio's whole CI below 0.5
MATCH_MARGIN = 1.0  # "match" = the 95 % CI of (margin − InfoNCE) lies above −1 Spearman point
FINAL_TASKS = ("stsb:dev", "sickr:dev")
CHECK_TOLERANCE = 0.05  # Spearman ×100: the reloaded final encoder must reproduce the run's last score

PAPER = "Nie, Zhang & Mao, ICLR 2023 (gradient dissipation)"
CLAIM_SHORT = (
    "InfoNCE's (and the margin losses') gradients fade over training, align_uniform's and DCL's do not; "
    "margin losses match or beat InfoNCE on STS"
)


# ------------------------------------------------------------------------------------------------- plan


def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """``start`` once, then every loss for seed 1, every loss for seed 2, ... (seed-major)."""
    return [(START, START_SEED)] + [(loss, seed) for seed in args.seeds for loss in args.losses]


def run_dir(args: argparse.Namespace, loss: str, seed: int) -> Path:
    return Path(args.runs) / NAME / f"{loss}-s{seed}"


def overrides(args: argparse.Namespace, loss: str, seed: int) -> list[str]:
    """The ``--set`` list of one run (``contrastext train recipes/gd.yaml --set ...`` repeats it by hand)."""
    diagnostic = args.diagnostic_batch or args.batch_size
    sets = [
        f"method_args.loss={loss}",
        f"seed={seed}",
        f"output_dir={run_dir(args, loss, seed)}",
        f"train.max_steps={args.steps}",
        f"train.batch_size={args.batch_size}",
        f"train.lr={args.lr}",
        f"data.max_length={args.max_length}",
        f"train.eval_every={args.eval_every}",
        "train.eval_at_start=true",
        f"train.save_every={args.steps}",
        "train.keep_last=1",
        "train.metric_for_best=null",
        f"train.log_every={args.log_every}",
        "train.overwrite=true",
        "train.progress_bar=false",
        "train.report_to=none",
        "eval.tasks=[stsb:dev]",
        f"eval.limit={args.eval_limit if args.eval_limit else 'null'}",
        "method_args.geometry=false",
        "method_args.gradients=true",
        f"method_args.diagnostic_batch_size={diagnostic}",
    ]
    return sets


def sizes(args: argparse.Namespace) -> dict:
    """The sizes a run depends on (kept in every record, so mixed records can be told apart)."""
    return {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "lr": args.lr,
        "eval_every": args.eval_every,
        "eval_limit": args.eval_limit,
        "diagnostic_batch": args.diagnostic_batch or args.batch_size,
        "final_limit": args.final_limit,
    }


def run_seconds(args: argparse.Namespace) -> float:
    """Seconds of one loss run on 2 quiet cores by the cost model (``experiments/cost.py``)."""
    train = cost.train_seconds(args.steps * 2 * args.batch_size, cost.tokens("wiki1m", args.max_length))
    evaluations = args.steps // args.eval_every + 2
    diagnostic = 2 * (args.diagnostic_batch or args.batch_size) * cost.DIAGNOSTIC_S_PER_SEQUENCE
    per_eval = cost.encode_seconds(2 * (args.eval_limit or 1500)) + diagnostic
    final = cost.encode_seconds(2 * (final_pairs(args) + (args.eval_limit or 1500)))  # + the reproduce check
    return train + evaluations * per_eval + final + 2 * cost.LOAD_S + cost.SAVE_S  # the run's load, the reload


def final_pairs(args: argparse.Namespace) -> int:
    """Pairs of the final evaluation: STS-B dev and SICK-R dev."""
    return (args.final_limit or 1500) + (args.final_limit or 500)


def reference_seconds(args: argparse.Namespace, setting: str) -> float:
    """A loss run, or ``start``: two loads and the final sets scored with two poolings."""
    if setting == START:
        return 2 * cost.LOAD_S + cost.encode_seconds(2 * 2 * final_pairs(args))
    return run_seconds(args)


# ------------------------------------------------------------------------------------------------- runs


def _final_scores(encoder, args: argparse.Namespace) -> dict:
    """Spearman / Pearson (×100) and n of ``encoder`` on STS-B dev and SICK-R dev (first ``final_limit``)."""
    from contrastext import evaluate_tasks

    result = evaluate_tasks(encoder, list(FINAL_TASKS), args.data_root, batch_size=128, limit=args.final_limit)
    metrics = {}
    for name, task in result["tasks"].items():
        metrics[f"{name}_dev_spearman"] = _finite(task.get("spearman"))
        metrics[f"{name}_dev_pearson"] = _finite(task.get("pearson"))
        metrics[f"{name}_dev_n"] = int(task["n"])
    return metrics


def _finite(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def run_start(args: argparse.Namespace) -> tuple[dict, dict]:
    """The untrained encoder as the runs' evaluations see it ([CLS], no MLP at inference), and as shipped."""
    from contrastext import TextEncoder, get_recipe, load_config, recipe_path
    from contrastext.models.names import locate_model
    from contrastext.runs.registry import parse_method_args
    from contrastext.runs.stages import seeded_build

    sets = overrides(args, BASELINE, START_SEED)
    config = load_config(recipe_path(RECIPE), sets)
    spec = get_recipe(config.method)
    bundle = seeded_build(spec.build, config, parse_method_args(spec, config), Path(args.data_root))
    bundle.method.eval()
    metrics = _final_scores(bundle.method.encoder, args)
    shipped = TextEncoder.from_pretrained(locate_model(config.model))
    metrics.update({f"shipped_{key}": value for key, value in _final_scores(shipped, args).items()})
    record_config = {
        "recipe": RECIPE,
        "overrides": sets,
        "measurement": "no training: the gd method's encoder as built (pooling cls, MLP in training only) and "
        f"{config.model} with its own pooling (shipped_*), scored on {', '.join(FINAL_TASKS)}",
        "sizes": sizes(args),
    }
    return record_config, metrics


def _curves(log_path: Path) -> dict:
    """Step → gradient norms / STS-B subset score (every evaluation) and step → training loss."""
    from contrastext import read_log

    records = read_log(log_path)
    evals = [r for r in records if "eval/grad_alignment" in r]
    if not evals:
        raise RuntimeError(f"{log_path}: no evaluation logged eval/grad_alignment (gradient diagnostics off?)")
    losses = [r for r in records if "loss" in r]
    return {
        "steps": [int(r["step"]) for r in evals],
        "grad_alignment": [float(r["eval/grad_alignment"]) for r in evals],
        "grad_uniformity": [float(r["eval/grad_uniformity"]) for r in evals],
        "grad_total": [float(r["eval/grad_total"]) for r in evals],
        "stsb_subset_spearman": [_finite(r.get("eval/stsb_dev_spearman")) for r in evals],
        "loss_steps": [int(r["step"]) for r in losses],
        "train_loss": [_finite(r["loss"]) for r in losses],
    }


def log_ratio(end: float | None, start: float | None) -> float | None:
    """ln(end / start) with an end of 0 counted as GRAD_FLOOR; None when start is 0 or missing."""
    if end is None or start is None or start <= 0:
        return None
    return math.log(max(end, GRAD_FLOOR) / start)


def gradient_summary(curves: dict) -> dict:
    """Start (step 0), first evaluation after it and end values of each part, and the log ratios."""
    metrics = {}
    steps = curves["steps"]
    if steps[0] != 0:
        raise RuntimeError(f"the first evaluation is at step {steps[0]}, not 0 (train.eval_at_start off?)")
    for part in (*PARTS, "total"):
        values = curves[f"grad_{part}"]
        metrics[f"grad_{part}_start"] = values[0]
        metrics[f"grad_{part}_first"] = values[1] if len(values) > 1 else None
        metrics[f"grad_{part}_end"] = values[-1]
        metrics[f"log_ratio_{part}"] = log_ratio(values[-1], values[0])
        metrics[f"log_ratio_{part}_vs_first"] = log_ratio(values[-1], values[1]) if len(values) > 2 else None
    metrics["first_eval_step"] = steps[1] if len(steps) > 1 else None
    return metrics


def run_loss(args: argparse.Namespace, loss: str, seed: int) -> tuple[dict, dict]:
    """Train one loss at one seed, read its curves, score its final encoder on the full dev sets."""
    from contrastext import TextEncoder, evaluate_tasks, load_config, recipe_path, run_recipe

    sets = overrides(args, loss, seed)
    config = load_config(recipe_path(RECIPE), sets)
    summary = run_recipe(config, data_root=Path(args.data_root))
    if summary["last_step"] != args.steps:
        raise RuntimeError(f"{loss} seed {seed}: stopped at step {summary['last_step']}, not {args.steps}")
    curves = _curves(Path(summary["log_path"]))
    encoder = TextEncoder.load(Path(summary["final_model_dir"]))
    # The reloaded final encoder must give the run's own last STS-B score (same pairs) before we trust it.
    run_score = summary["metrics"]["stsb_dev_spearman"]
    check = evaluate_tasks(encoder, ["stsb:dev"], args.data_root, batch_size=128, limit=args.eval_limit)
    reloaded = check["tasks"]["stsb"]["spearman"]
    if abs(reloaded - run_score) > CHECK_TOLERANCE:
        raise RuntimeError(
            f"{loss} seed {seed}: the reloaded final encoder scores {reloaded:.3f} on the first "
            f"{args.eval_limit} STS-B dev pairs, the run logged {run_score:.3f} for its last weights"
        )
    metrics = {
        **_final_scores(encoder, args),
        "stsb_subset_spearman_end": _finite(run_score),
        "stsb_subset_spearman_start": _finite(summary["start_metrics"].get("stsb_dev_spearman")),
        "last_step": int(summary["last_step"]),
        **gradient_summary(curves),
        "curves": curves,
    }
    record_config = {
        "recipe": RECIPE,
        "overrides": sets,
        "final_eval": f"TextEncoder.load(<output_dir>/final/encoder) + evaluate_tasks({list(FINAL_TASKS)}, "
        f"limit={args.final_limit}) (= contrastext eval --model <output_dir>/final/encoder "
        f"--tasks {','.join(FINAL_TASKS)})",
        "sizes": sizes(args),
    }
    if not args.keep_runs:
        shutil.rmtree(config.output_dir, ignore_errors=True)
    return record_config, metrics


# ------------------------------------------------------------------------------------------- statistics


def _loss_records(store: harness.RecordStore) -> list[dict]:
    return [r for r in store.records if r["setting"] in LOSSES]


def _zero_baseline(store: harness.RecordStore, treatment: str):
    """A ``values`` function for :func:`harness.compare` whose baseline ``"1×"`` is 0 at every seed."""

    def read(setting: str, key: str) -> dict[int, float]:
        if setting == "1×":
            return {seed: 0.0 for seed in store.values(treatment, key)}
        return store.values(setting, key)

    return read


def fade_comparison(store: harness.RecordStore, loss: str, part: str) -> harness.Comparison:
    """ln(end / start) of one part against 0: direction −1 (fades)."""
    return harness.compare(store, loss, "1×", f"log_ratio_{part}", -1, values=_zero_baseline(store, loss))


def relative_comparison(store: harness.RecordStore, loss: str, part: str) -> harness.Comparison:
    """ln ratio of ``loss`` − ln ratio of InfoNCE, paired by seed: direction +1 (fades less than InfoNCE)."""
    return harness.compare(store, loss, BASELINE, f"log_ratio_{part}", +1)


def _ratio_text(c: harness.Comparison) -> str:
    """``×0.31 [0.20, 0.45] (n = 3)``: the geometric mean ratio and its interval."""
    if not c.seeds:
        return "–"
    if len(c.seeds) < 2:
        return f"×{math.exp(c.mean_difference):.3g} (n = 1)"
    return (
        f"×{math.exp(c.mean_difference):.3g} [{math.exp(c.low):.3g}, {math.exp(c.high):.3g}] (n = {len(c.seeds)})"
    )


def _verdict_word(c: harness.Comparison) -> str:
    return c.verdict if c.seeds else "no runs"


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def dissipation_checks(store: harness.RecordStore) -> list[tuple[str, str, harness.Comparison]]:
    """Every check of verdict (a): (loss, part, comparison) for the paper's fading and non-fading losses."""
    checks = []
    for part in PARTS:
        checks += [(loss, part, fade_comparison(store, loss, part)) for loss in FADING]
        checks += [(loss, part, relative_comparison(store, loss, part)) for loss in DECOUPLED]
    return checks


def sts_checks(store: harness.RecordStore, key: str = "stsb_dev_spearman") -> list[tuple[str, harness.Comparison]]:
    return [(loss, harness.compare(store, loss, BASELINE, key, +1)) for loss in MARGINS]


def matches(c: harness.Comparison) -> bool:
    """"Match": at least 2 paired seeds and the CI's lower end above −MATCH_MARGIN points."""
    return len(c.seeds) >= 2 and not math.isnan(c.low) and c.low > -MATCH_MARGIN


def halves(c: harness.Comparison) -> bool:
    """The strict reading of "fades": at least 2 seeds and the ratio's CI entirely below HALVING."""
    return len(c.seeds) >= 2 and not math.isnan(c.high) and c.high < math.log(HALVING)


def _fade_word(c: harness.Comparison) -> str:
    if not c.seeds:
        return "no runs"
    if len(c.seeds) < 2:
        return c.verdict
    return f"{c.verdict}{' (at least halves)' if halves(c) else ' (falls by less than half)' if c.reproduced else ''}"


def _overall(checks: list[bool], enough: bool) -> str:
    if not enough:
        return "not enough seeds"
    if all(checks):
        return "reproduced"
    return "not reproduced at this scale" if not any(checks) else f"partly ({sum(checks)}/{len(checks)} checks)"


def verdicts(store: harness.RecordStore) -> dict[str, str]:
    """Short verdicts: (a) dissipation, (b) margins match / beat InfoNCE on STS-B dev."""
    a = dissipation_checks(store)
    enough_a = all(len(c.seeds) >= 2 for _, _, c in a)
    b = [c for _, c in sts_checks(store)]
    enough_b = all(len(c.seeds) >= 2 for c in b)
    strict = [halves(c) if loss in FADING else c.reproduced for loss, _, c in a]
    return {
        "dissipation": _overall([c.reproduced for _, _, c in a], enough_a),
        "dissipation_strict": _overall(strict, enough_a),
        "sts_match": _overall([matches(c) for c in b], enough_b),
        "sts_beat": _overall([c.reproduced for c in b], enough_b),
    }


# ------------------------------------------------------------------------------------------------ report

PAPER_QUOTES = """\
> "We find a performance gap between sentence representations obtained by jointly optimizing alignment and
> uniformity on the STS task and those obtained using contrastive loss. [...] Analyzing them based on the
> variation of the gradient norms, we find that there is a property of "gradient dissipation" in contrastive
> loss and believe that it is the key to preventing overfitting. We simulate similar "gradient dissipation" of
> contrastive loss on four optimization objectives of two forms, and achieve the same or even better
> performance than contrastive loss on the STS tasks, confirming our hypothesis." (Abstract)

> "we decompose the gradient of the contrastive loss into an alignment component and a uniformity component
> and compare the norms of these two components with their counter-parts in training with the decoupled
> contrastive losses. Interestingly, we observe a distinct "gradient dissipation" phenomenon in training with
> the standard contrastive loss: the gradient signal quickly drops and vanishes as soon as the negative
> example is adequately further away from the anchor than the positive example, where the adequacy appears to
> be reflected by a rather moderate threshold. Notably such a phenomenon does not appear in the training
> schemes using a decoupled contrastive loss, when the negative sample size is small." (Sec. 1)

> "we construct two new loss functions, both capable of inducing "gradient dissipation" in their training
> dynamics. We test them experimentally and observe that indeed training with both losses gives comparable or
> even better performance in the STS tasks than the standard contrastive loss." (Sec. 1)

> "we find that optimization using alignment and uniformity losses produces lower performance than that with
> contrastive loss in the STS tasks. [...] we also observe the same phenomenon in contrastive learning with
> another loss function, Decoupled Contrastive Loss (DCL)" (Sec. 1)
"""

PAPER_NOTE = """\
**What our copy of the paper holds.** `../shared/papers/gradient-dissipation.txt` is the abstract and the
introduction only: no equation, no table, no figure, no hyper-parameter. So the paper's numbers cannot be
quoted (the table below gives its claims, not numbers), and the objectives' names come from the authors' code
(docs/methods/gd.md): the "decoupled" losses are align_uniform ("a&u") and DCL ("decouple"); the losses built
to dissipate are the margin triplets MET / MAT / MPT (`margin_euclidean`, `margin_angle`, `margin_product`)
and the hinged DCL ("decouple_pos", DCL+). The abstract's "four optimization objectives of two forms" and the
introduction's "two new loss functions" are not named in the extract; we read them as these four (two forms:
margin triplets and hinged DCL). The issue names only the margin losses, so the verdicts test those; hinged
DCL is shown as "our reading" and left out of the verdicts. The issue's paraphrase ("InfoNCE's and the margin
losses' gradients fade", "match or beat") agrees with the quotes ("capable of inducing gradient
dissipation", "the same or even better performance"); the paper's comparison set is "the STS tasks" (the
authors' code: STS12–16, STS-B, SICK-R test), ours STS-B dev and SICK-R dev (the shipped data has no STS-B /
SICK-R test files)."""


def _records_sizes(store: harness.RecordStore, args: argparse.Namespace) -> tuple[dict, bool]:
    """The sizes of the recorded loss runs (the args' when there are none) and whether they all agree."""
    seen = [r["config"].get("sizes") for r in _loss_records(store)]
    distinct = {tuple(sorted(s.items())) for s in seen if s}
    if not distinct:
        return sizes(args), True
    first = next(s for s in seen if s)
    return first, len(distinct) == 1


def _record_seeds(store: harness.RecordStore) -> list[int]:
    return sorted({r["seed"] for r in _loss_records(store)})


def protocol_section(store: harness.RecordStore, args: argparse.Namespace) -> str:
    size, uniform = _records_sizes(store, args)
    steps, batch, lr = size["steps"], size["batch_size"], size["lr"]
    rows = [
        ("model", "bert-base-uncased", "all-MiniLM-L6-v2 (`bundled:all-MiniLM-L6-v2`), already sentence-tuned"),
        ("training data", "wiki1m, 1M sentences, 1 epoch", f"the 11,914-sentence wiki1m head; {steps} × {batch} = "
         f"{steps * batch:,} sentences, each once"),
        ("batch (negatives per anchor)", "128 (127)", f"{batch} ({batch - 1})"),
        ("steps", "7,813 (one epoch of 1M at 128)", f"{steps}"),
        ("learning rate, schedule", "1e-5, linear decay, AdamW, clip 1.0", f"{lr:g}, linear decay over {steps} "
         "steps, AdamW, clip 1.0"),
        ("max length, pooling, τ, margins", "32, [CLS] + MLP in training, 0.05, MET 0.45 / MAT 0.15π / MPT 0.09",
         f"{size['max_length']}, the same, the same, the same"),
        ("gradient norms", "computation not given", f"mean per-anchor norms of the alignment / uniformity parts "
         f"of ∇(B·loss) on a fixed batch of {size['diagnostic_batch']} dropout twins, at step 0 and every "
         f"{size['eval_every']} steps (`evaluation/gradients.py`, our construction)"),
        ("model selection", "best STS-B dev checkpoint (every 125 steps)", "none: the last weights (selecting "
         "on STS-B dev would score the selected weights on the data that chose them)"),
        ("STS during training", "STS-B dev (full)", f"STS-B dev, first {size['eval_limit']} pairs (cheap)"),
        ("final scores", "STS12–16, STS-B, SICK-R test", "STS-B dev (1,500 pairs) and SICK-R dev (500), full"
         + ("" if size["final_limit"] is None else f" — here only the first {size['final_limit']} pairs")),
        ("seeds", "not given (code: 42)", f"{', '.join(map(str, _record_seeds(store) or args.seeds))}"),
    ]
    table = harness.markdown_table(["", "authors (code, per docs/methods/gd.md)", "ours"], rows)
    seeds = _record_seeds(store) or list(args.seeds)
    runs = len(LOSSES) * len(seeds)
    per_run = run_seconds(argparse.Namespace(**{**vars(args), **{
        "steps": steps, "batch_size": batch, "max_length": size["max_length"], "eval_every": size["eval_every"],
        "eval_limit": size["eval_limit"], "diagnostic_batch": size["diagnostic_batch"],
        "final_limit": size["final_limit"]}}))
    notes = f"""\
**Why these sizes.** The {runs} runs must fit 90 minutes on 2 CPU cores: {steps} steps at batch {batch} is
≈ {per_run / 60:.1f} min per run on 2 quiet cores (`experiments/cost.py`), ≈ {runs * per_run / 60:.0f} min in all.
The learning rate stays the recipe's (the authors') 1e-5 ({lr:g} here). AdamW's step size hardly depends on
the batch size, so each of our steps moves the weights about as far as one of theirs, on a noisier gradient
(batch {batch}, not 128), for {steps} steps instead of 7,813: about {100 * steps / 7813:.1f} % of their path.
A linear scaling rule (lr ∝ batch, {1e-5 * batch / 128:.3g}) would make our few steps move the model even
less, so we did not use it. A batch of {batch} means {batch - 1} negatives per anchor, fewer than the
authors' 127; the paper says the decoupled losses' lack of dissipation shows "when the negative sample size
is small", so the small batch is the regime of the claim. The diagnostic batch ({size['diagnostic_batch']})
is the size of the training batch, so the gradients measured see as many negatives as training does.

**Seeds.** The issue asks for 3 seeds (here: {', '.join(map(str, seeds))}). That is below the 5 of issue 12's
rule. The bootstrap intervals then rest on n = {len(seeds)} paired differences. A percentile bootstrap of so few
values cannot reach beyond their smallest and largest, so the intervals are narrow and optimistic. Read
"reproduced" as "every seed agrees".

**all-MiniLM-L6-v2 is already sentence-tuned** (a contrastive objective, InfoNCE at scale 20, i.e. τ = 0.05,
over a billion pairs, with mean pooling). The paper starts from bert-base-uncased, whose similarities are
"rather poorly correlated with the human-rated similarities" (Sec. 1). Ours start from a model already trained
for exactly that, read through [CLS] (not its own pooling) and a new, random MLP in training. The gradient
curves therefore show how each objective's gradient evolves from that start, not from BERT's. If the start is
already near InfoNCE's dissipated regime, its ratio end/start can only be small. On STS our runs move a good
model, in either direction, rather than teach a raw one; the gaps between losses need not be the paper's. The
`start` rows give the untrained encoder read as the runs read it ([CLS]) and with its own mean pooling."""
    if not uniform:
        notes += "\n\n**Warning:** the recorded runs do not all have the same sizes (see each record's `config.sizes`)."
    return "### Protocol: ours and the authors'\n\n" + table + "\n" + notes + "\n"


def _setting_values(store: harness.RecordStore, setting: str, key: str) -> list[float]:
    return list(store.values(setting, key).values())


def results_section(store: harness.RecordStore) -> str:
    start = store.get(START, START_SEED)
    rows = []
    if start is not None:
        m = start["metrics"]
        rows.append(("start: untrained, [CLS] (as the runs score)", "–", _fmt(m.get("stsb_dev_spearman"), 4),
                     _fmt(m.get("sickr_dev_spearman"), 4), "–", "–"))
        rows.append(("start: untrained, mean pooling (as shipped)", "–", _fmt(m.get("shipped_stsb_dev_spearman"), 4),
                     _fmt(m.get("shipped_sickr_dev_spearman"), 4), "–", "–"))
    for loss in LOSSES:
        if loss == BASELINE:
            delta_b = delta_s = "(baseline)"
        else:
            cb = harness.compare(store, loss, BASELINE, "stsb_dev_spearman", +1)
            cs = harness.compare(store, loss, BASELINE, "sickr_dev_spearman", +1)
            delta_b, delta_s = _delta_text(cb), _delta_text(cs)
        paper = {"infonce": "baseline", "align_uniform": "< InfoNCE", "dcl": "< InfoNCE"}.get(
            loss, "≥ InfoNCE" if loss in MARGINS else "≥ InfoNCE (our reading)")
        rows.append((
            loss, paper,
            harness.fmt_mean_std(_setting_values(store, loss, "stsb_dev_spearman")),
            harness.fmt_mean_std(_setting_values(store, loss, "sickr_dev_spearman")),
            delta_b, delta_s,
        ))
    table = harness.markdown_table(
        ["setting", "paper (STS, direction; no numbers in our copy)", "STS-B dev ρ×100, final", "SICK-R dev ρ×100, final",
         "Δ STS-B vs InfoNCE [95 % CI]", "Δ SICK-R vs InfoNCE [95 % CI]"],
        rows,
    )
    return "### Final STS scores (full dev sets, last weights; mean ± std (n))\n\n" + table


def _delta_text(c: harness.Comparison) -> str:
    if len(c.seeds) < 2:
        return "–" if not c.seeds else f"{c.mean_difference:+.2f} (n = 1)"
    return f"{c.mean_difference:+.2f} [{c.low:+.2f}, {c.high:+.2f}] (n = {len(c.seeds)})"


def dissipation_section(store: harness.RecordStore) -> str:
    rows = []
    for loss in LOSSES:
        cells = [loss, EXPECTED[loss]]
        for part in PARTS:
            start = _mean(_setting_values(store, loss, f"grad_{part}_start"))
            end = _mean(_setting_values(store, loss, f"grad_{part}_end"))
            cells.append(f"{_fmt(start)} → {_fmt(end)}")
            cells.append(_ratio_text(fade_comparison(store, loss, part)))
        first = fade_comparison_key(store, loss, "log_ratio_alignment_vs_first")
        cells.append(_ratio_text(first))
        if loss in DECOUPLED:
            cells.append("; ".join(
                f"{part}: {_ratio_text(relative_comparison(store, loss, part))} of InfoNCE's → "
                f"{_verdict_word(relative_comparison(store, loss, part))}" for part in PARTS))
        elif loss in FADING:
            cells.append("; ".join(f"{part}: {_fade_word(fade_comparison(store, loss, part))}" for part in PARTS))
        else:
            cells.append("not tested (our reading)")
        rows.append(cells)
    table = harness.markdown_table(
        ["loss", "paper's direction", "‖g_align‖ start → end (mean)", "end/start (geo-mean [95 % CI])",
         "‖g_unif‖ start → end (mean)", "end/start (geo-mean [95 % CI])", "‖g_align‖ end / first eval after 0",
         "verdict (fades: end/start CI below 1, strict: below 0.5; does not fade: ratio ÷ InfoNCE's CI above 1)"],
        rows,
    )
    return (
        "### Gradient norms: start (step 0) → end, per loss\n\n"
        "Mean per-anchor norms on the fixed diagnostic batch; the ratio is end / start per seed, averaged as a "
        "geometric mean, with the 95 % bootstrap interval of the mean log ratio (a norm of exactly 0, every "
        f"margin met, counts as {GRAD_FLOOR:g}). For align_uniform and DCL the test is relative: their ratio "
        "divided by InfoNCE's at the same seed, which the paper says is above 1 (they fade less, if at all).\n\n"
        + table
    )


def fade_comparison_key(store: harness.RecordStore, loss: str, key: str) -> harness.Comparison:
    return harness.compare(store, loss, "1×", key, -1, values=_zero_baseline(store, loss))


def verdict_lines(store: harness.RecordStore) -> str:
    v = verdicts(store)
    lines = []
    parts_text = []
    for loss, part, c in dissipation_checks(store):
        if loss in DECOUPLED:
            parts_text.append(f"{loss} {part} ratio ÷ InfoNCE's {_ratio_text(c)} → {c.verdict}")
        else:
            parts_text.append(f"{loss} {part} end/start {_ratio_text(c)} → {_fade_word(c)}")
    lines.append(
        f"**Verdict:** (a) gradient dissipation (InfoNCE and the margin losses fade, align_uniform and DCL fade "
        f"less than InfoNCE; both gradient parts; n = seeds paired): **{v['dissipation']}**; strict reading "
        f"(the fading losses' end/start CI below {HALVING:g}, i.e. the norm at least halves): "
        f"**{v['dissipation_strict']}**. "
        + "; ".join(parts_text) + "."
    )
    b = sts_checks(store)
    match_text = "; ".join(
        f"{loss} − infonce Δ = {c.mean_difference:+.2f}, 95 % CI [{c.low:+.2f}, {c.high:+.2f}] (n = {len(c.seeds)})"
        f" → {'matches' if matches(c) else 'does not match'}, {'beats' if c.reproduced else 'does not beat'}"
        if len(c.seeds) >= 2 else f"{loss}: not enough seeds"
        for loss, c in b
    )
    lines.append(
        f"**Verdict:** (b) margin losses vs InfoNCE on full STS-B dev (\"match\" = the 95 % CI of the paired "
        f"difference lies above −{MATCH_MARGIN:g} Spearman point; \"beat\" = it lies above 0): match "
        f"**{v['sts_match']}**, beat **{v['sts_beat']}**. {match_text}."
    )
    sick = sts_checks(store, "sickr_dev_spearman")
    lines.append(
        "SICK-R dev, same comparison: " + "; ".join(
            f"{c.text()}" if len(c.seeds) >= 2 else f"{loss}: not enough seeds" for loss, c in sick
        ) + "."
    )
    below = [harness.compare(store, loss, BASELINE, "stsb_dev_spearman", -1) for loss in DECOUPLED]
    lines.append(
        "**Verdict:** (c) the decoupled losses below InfoNCE on STS-B dev (the paper's performance gap): "
        + "; ".join(c.text() if len(c.seeds) >= 2 else f"{c.treatment}: not enough seeds" for c in below) + "."
    )
    return "\n\n".join(lines) + "\n"


def report(store: harness.RecordStore, args: argparse.Namespace) -> str:
    """The docs/RESULTS.md section (markdown)."""
    done = len(_loss_records(store))
    total = len(args.losses) * len(args.seeds)
    partial = "" if done >= total else f"\n\n**Partial results: {done}/{total} training runs recorded.**"
    size, _ = _records_sizes(store, args)  # the sizes the records were made with (else the arguments')
    seeds = _record_seeds(store) or list(args.seeds)
    extra = (
        f"--steps {size['steps']} --batch-size {size['batch_size']} --max-length {size['max_length']} "
        f"--lr {size['lr']:g} --eval-every {size['eval_every']} --eval-limit {size['eval_limit']} "
        f"--seeds {' '.join(map(str, seeds))}"
    )
    if size.get("final_limit") is not None:
        extra += f" --final-limit {size['final_limit']}"
    sections = [
        "## Nie, Zhang & Mao (ICLR 2023): gradient dissipation across seven objectives" + partial,
        "### The claim\n\n" + PAPER_QUOTES,
        "### The paper's numbers\n\n" + harness.markdown_table(
            ["claim (paper)", "InfoNCE", "align_uniform, DCL (decoupled)", "margin losses (MET, MAT, MPT)"],
            [
                ("gradient norms over training", "\"quickly drops and vanishes\"", "\"does not appear\" (no dissipation)",
                 "\"capable of inducing gradient dissipation\""),
                ("STS performance", "reference", "\"lower performance\"", "\"comparable or even better\""),
                ("numbers", "not in our copy", "not in our copy", "not in our copy"),
            ],
        ) + "\n" + PAPER_NOTE,
        protocol_section(store, args),
        dissipation_section(store),
        results_section(store),
        "### Verdicts\n\n" + verdict_lines(store),
        f"![Gradient norms of the alignment and uniformity parts over training, and final STS-B / SICK-R dev "
        f"per loss]({NAME}.png)",
        "### Command\n\n```bash\n" + harness.command(NAME, args, extra) + "\n```\n\n"
        "One run by hand: `contrastext train recipes/gd.yaml --data-root ../shared/data --set <a record's "
        "config.overrides>`, then `contrastext eval --model <output_dir>/final/encoder --tasks "
        "stsb:dev,sickr:dev --data-root ../shared/data`.",
    ]
    return "\n\n".join(sections) + "\n"


def summary(store: harness.RecordStore) -> dict:
    """One line each: paper, claim, verdict, numbers (for the README / RESULTS summary table)."""
    v = verdicts(store)
    done = len(_loss_records(store))
    total = len(LOSSES) * len(SEEDS)
    verdict = (
        f"dissipation: {v['dissipation']} (strict, ≥ halving: {v['dissipation_strict']}); margins match InfoNCE on STS-B: {v['sts_match']}; "
        f"beat: {v['sts_beat']}"
    )
    if done < total:
        verdict = f"partial: {done}/{total} runs; " + verdict
    infonce = fade_comparison(store, BASELINE, "alignment")
    au = fade_comparison(store, "align_uniform", "alignment")
    deltas = ", ".join(
        f"{loss.replace('margin_', 'M-')} {c.mean_difference:+.2f}" if c.seeds else f"{loss} –"
        for loss, c in sts_checks(store)
    )
    numbers = (
        f"‖g_align‖ end/start: infonce {_ratio_text(infonce)}, align_uniform {_ratio_text(au)}; "
        f"STS-B dev Δ vs infonce: {deltas}"
    )
    return {"paper": PAPER, "claim": CLAIM_SHORT, "verdict": verdict, "numbers": numbers}


# -------------------------------------------------------------------------------------------------- plot


def _curve_band(store: harness.RecordStore, loss: str, key: str):
    """Steps common to every seed's curve, and the mean / min / max over seeds at each (zeros at the floor)."""
    curves = [r["metrics"]["curves"] for r in store.records if r["setting"] == loss and "curves" in r["metrics"]]
    if not curves:
        return None
    common = sorted(set.intersection(*(set(c["steps"]) for c in curves)))
    table = [[max(c[key][c["steps"].index(s)], GRAD_FLOOR) for c in curves] for s in common]
    return common, [statistics.fmean(t) for t in table], [min(t) for t in table], [max(t) for t in table]


def plot(store: harness.RecordStore, path: Path) -> Path:
    """2 × 2: ‖g_align‖ and ‖g_unif‖ vs step (log y, mean over seeds, band min–max); final STS-B / SICK-R dev."""
    plt = harness.pyplot()
    figure, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    colours = {loss: plt.get_cmap("tab10")(i) for i, loss in enumerate(LOSSES)}
    styles = {loss: ("--" if loss in DECOUPLED else "-") for loss in LOSSES}
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda value, _: f"{value:.2g}")  # plain text: faster and clearer than mathtext
    for ax, part in zip(axes[0], PARTS, strict=True):
        drawn = False
        lows, highs = [], []
        for loss in LOSSES:
            band = _curve_band(store, loss, f"grad_{part}")
            if band is None:
                continue
            steps, mean, low, high = band
            n = len(store.values(loss, f"grad_{part}_end"))
            ax.plot(steps, mean, styles[loss], color=colours[loss], marker=".", label=f"{loss} (n={n})")
            ax.fill_between(steps, low, high, color=colours[loss], alpha=0.15, linewidth=0)
            lows.append(min(low))
            highs.append(max(high))
            drawn = True
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        narrow = drawn and math.log10(max(highs) / min(lows)) < 1.5
        ax.yaxis.set_minor_formatter(plain if narrow else NullFormatter())
        ax.set_xlabel("step")
        ax.set_ylabel(f"mean per-anchor norm (0 drawn at {GRAD_FLOOR:g})", fontsize="small")
        ax.set_title(f"‖{part} part of ∇‖, fixed batch (mean over seeds, band min–max)", fontsize="medium")
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize="x-small")
        else:
            ax.text(0.5, 0.5, "no runs yet", ha="center", va="center", transform=ax.transAxes)
    start = store.get(START, START_SEED)
    for ax, key, title in (
        (axes[1][0], "stsb_dev_spearman", "final STS-B dev Spearman ×100"),
        (axes[1][1], "sickr_dev_spearman", "final SICK-R dev Spearman ×100"),
    ):
        counts = sorted({r["metrics"].get(key.replace("spearman", "n")) for r in store.records} - {None})
        title += f" ({'/'.join(map(str, counts))} pairs)" if counts else ""
        positions = range(len(LOSSES))
        for x, loss in zip(positions, LOSSES, strict=True):
            values = store.values(loss, key)
            if not values:
                ax.text(x, 0.02, "–", ha="center", transform=ax.get_xaxis_transform())
                continue
            ax.bar(x, statistics.fmean(values.values()), color=colours[loss], alpha=0.5, width=0.7)
            ax.scatter([x] * len(values), list(values.values()), color="black", s=14, zorder=3)
        if start is not None:
            for metric_key, style, label in ((key, "--", "untrained, [CLS]"), (f"shipped_{key}", ":", "untrained, mean pooling")):
                value = start["metrics"].get(metric_key)
                if value is not None:
                    ax.axhline(value, color="grey", linestyle=style, label=label)
            ax.legend(fontsize="x-small", loc="lower right")
        values_all = [v for loss in LOSSES for v in store.values(loss, key).values()]
        if start is not None:
            values_all += [v for v in (start["metrics"].get(key), start["metrics"].get(f"shipped_{key}")) if v is not None]
        if values_all:
            ax.set_ylim(min(values_all) - 3, max(values_all) + 2)
        ax.set_xticks(list(positions))
        ax.set_xticklabels([loss.replace("margin_", "margin\n") for loss in LOSSES], fontsize="small")
        ax.set_title(title + "; bars: mean, dots: seeds", fontsize="medium")
        ax.grid(alpha=0.3, axis="y")
    figure.suptitle("Gradient dissipation (Nie et al. 2023), all-MiniLM-L6-v2 on the wiki1m head", fontsize="medium")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


# ---------------------------------------------------------------------------------------------- command


def build_parser() -> argparse.ArgumentParser:
    p = harness.parser(__doc__.split("\n\n")[0], budget_minutes=90)
    p.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    p.add_argument("--steps", type=int, default=500, help="optimiser steps per run (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=16, help="default %(default)s")
    p.add_argument("--max-length", type=int, default=32, help="training tokens per sentence (default %(default)s)")
    p.add_argument("--lr", type=float, default=1e-5, help="the recipe's (authors') 1e-5 by default")
    p.add_argument("--eval-every", type=int, default=50, help="gradient diagnostics + STS-B subset every N steps")
    p.add_argument("--eval-limit", type=int, default=200, help="STS-B dev pairs scored during training")
    p.add_argument("--final-limit", type=int, default=None, help="pairs of the final evaluation (default: all)")
    p.add_argument("--diagnostic-batch", type=int, default=None, help="fixed diagnostic batch (default: batch size)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--keep-runs", action="store_true", help="keep the run folders (weights, checkpoints)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.losses = [loss for loss in LOSSES if loss in args.losses]
    store = harness.RecordStore(NAME, args.results)
    missing = 0
    if not args.report_only:
        def run_one(setting: str, seed: int) -> tuple[dict, dict]:
            return run_start(args) if setting == START else run_loss(args, setting, seed)

        reference = functools.partial(reference_seconds, args)
        missing = harness.run_plan(store, plan(args), run_one, harness.Budget(args.budget_minutes), reference)
    markdown = report(store, args)
    md_path = harness.write_report(store, markdown)
    png = plot(store, Path(args.results) / f"{NAME}.png")
    print(f"[{NAME}] wrote {md_path}, {png}; {missing} run(s) still missing", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
