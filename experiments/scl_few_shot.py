"""SCL few-shot (Gunel et al., ICLR 2021, §4.1, §5.2, Table 4): SST-2 with N = 20, 100, 1000 training examples
in total, cross-entropy alone (CE, ``method_args.lam=0``) vs CE + supervised contrastive loss ((1 − λ)·CE +
λ·SupCon, τ 0.3) with λ tuned on validation per draw from a reduced grid {0.1, 0.5, 0.9}, 10 draws per N.

Each run record is ONE draw of one setting (``"n20/ce"``, ``"n20/ce+scl@0.1"``, ``"n20/ce+scl@0.5"``,
``"n20/ce+scl@0.9"``, ``"n100/ce"``, ...; seed = draw 1..10; λ written with ``:g``): the ``scl`` recipe with
``method_args.seeds=[<draw>]``, so the draw's few-shot sample (N in total, following SST-2 train's label
distribution), its training randomness and its folder are the recipe's own, and CE and every CE+SCL λ of one
draw train on the same N examples. The validation / test split of SST-2 dev is the recipe's (``split_seed`` 0:
436 validation rows for checkpoint selection, 436 disjoint test rows, the SAME rows for every draw and run).
Per record: validation accuracy of the checkpoint selected on validation, its test accuracy, the selected
step and the validation curve.

**λ is tuned, not run.** The paper: λ "is a scalar weighting hyperparameter that we tune for each downstream
task" (§2), grid and values not given. Here the grid is reduced to ``--lams`` (default 0.1 0.5 0.9; τ stays
0.3) and the report computes *tuned CE+SCL* per draw: among the λ recorded for that draw, the one with the best
VALIDATION accuracy (ties → the smaller λ), and its TEST accuracy. Only draws with every λ of ``--lams``
recorded count. The verdicts compare tuned CE+SCL with CE; each fixed λ vs CE is shown beside as secondary
lines. (The first version ran one point, λ = 0.9, under the setting name ``<N>/ce+scl``: such records are
renamed ``<N>/ce+scl@0.9`` when the store is loaded, and saved back, so they are reused as that grid point.)

The report computes, per setting over its recorded draws, the paper's figure (mean ± std of the test
accuracy of the top 3 draws by validation accuracy: ``contrastext.runs.scl.top_k_by_validation``, the
function the recipe's own ``summary.json`` uses) and the plain mean ± std of all draws. The verdict per N
uses the paired per-draw test-accuracy differences tuned CE+SCL − CE (95 % bootstrap interval, harness rule);
"largest gain at N = 20" compares Δ(20) with Δ(100) and Δ(1000) by an unpaired bootstrap over draws.
Floor-effect guard: the majority-class share of the test rows (computed from SST-2 through the recipe's own
split, ``contrastext.runs.data.split_validation_test``) is the accuracy of always answering the larger class;
a setting whose mean test accuracy is within 3 points of it (or below) is flagged "at chance", in the table
and in every verdict that involves it.

Defaults (their reference cost on 2 quiet cores: ``experiments/cost.py``, per run: the steps of a mean batch of
SST-2 sentences, the validation passes, the test rows once, loading and saving; stated in the report):

    N = 20:   200 steps (100 epochs; batches of 16 + 4), evaluated every 40 steps (5)
    N = 100:  150 steps (~21 epochs),                   evaluated every 30 steps (5)
    N = 1000: 125 steps (2 epochs of 63 batches),       evaluated every 25 steps (5)

120 runs (3 N × 4 settings (CE and CE+SCL at 3 λ) × 10 draws); on a loaded machine ``--budget-minutes`` stops
the sitting and the next call goes on. N = 20 keeps the recipe's 200 steps: in a check run (CE, draw 1, 150
steps) validation accuracy was still rising at the end (57.6, 59.9, 65.1, 67.2, 70.4 at steps 30 … 150). The
paper does not give its training length (early stopping "at various epochs", §4.1).

Example::

    python experiments/scl_few_shot.py --data-root ../shared/data --budget-minutes 90
    python experiments/scl_few_shot.py --report-only          # table + plot from docs/results/scl_few_shot.json
    # a tiny smoke test (never into docs/results):
    python experiments/scl_few_shot.py --sizes 20 100 --draws 2 --lams 0.5 0.9 --steps 4 --eval-every 2 \\
        --results /tmp/scl_few_shot-smoke --runs /tmp/scl_few_shot-runs
"""

from __future__ import annotations

import argparse
import collections
import functools
import math
import shutil
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost  # noqa: E402
import harness  # noqa: E402

NAME = "scl_few_shot"
RECIPE = "scl"
SIZES = (20, 100, 1000)
DRAWS = 10
STEPS = {20: 200, 100: 150, 1000: 125}
EVAL_EVERY = {20: 40, 100: 30, 1000: 25}
BATCH_SIZE = 16  # the recipe's (§4.1)
SPLIT_ROWS = 436  # SST-2 dev rows of the validation split (and of the disjoint test split)
LAMS = (0.1, 0.5, 0.9)  # the paper's λ grid (tuned per task, not reported) reduced to three points
TEMPERATURE = 0.3  # the recipe's τ (tuned in the paper, not reported)
LEGACY_LAM = 0.9  # the one λ of the first version, whose settings were "<prefix>/ce+scl"
CE, SCL = "ce", "ce+scl"
TUNED = "ce+scl@tuned"  # computed in the report from the λ runs of a draw, never run
CHANCE_MARGIN = 3.0  # points of test accuracy above the majority-class share still counted "at chance"
TOP_K = 3  # §4.1: "the top 3 models based on their validation accuracies"
VALIDATION_KEY, TEST_KEY = "validation_accuracy", "test_accuracy"
PAPER_TASK_KEYS = ("sst2_validation_accuracy", "sst2_test_accuracy")

# Table 4, SST-2 column, RoBERTa-large: mean ± std of the test accuracy of the top 3 of 10 draws (CE + SCL: the
# paper's tuned λ, τ).
PAPER = {
    20: {"ce": (85.9, 2.1), "ce+scl": (88.1, 3.3)},
    100: {"ce": (91.1, 1.3), "ce+scl": (92.8, 1.3)},
    1000: {"ce": (94.0, 0.6), "ce+scl": (94.1, 0.5)},
}
CLAIM = (
    "We observe that the SCL term improves performance over the baseline significantly across all datasets "
    "and data regimes, leading to 10.7% improvement on QNLI, 3.4% improvement on MNLI, and 2.2% improvement on "
    "SST-2, where we have 20 labeled examples for training. We see that as we increase the number of labeled "
    "examples, performance improvement over the baseline decreases, leading to 1.9% improvement on MNLI for "
    "100 examples and 0.6% improvement on QNLI for 1000 examples."
)


# ------------------------------------------------------------------------------------------- losses / λ


def scl_loss(lam: float) -> str:
    """``0.5`` -> ``"ce+scl@0.5"`` (λ written with ``:g``)."""
    return f"{SCL}@{lam:g}"


def losses(lams: Sequence[float]) -> list[str]:
    """The run settings' losses: CE, then CE+SCL at each λ (in the order given)."""
    return [CE, *(scl_loss(lam) for lam in lams)]


def loss_lam(loss: str) -> float:
    """λ of a run's loss: ``"ce"`` -> 0, ``"ce+scl@0.5"`` -> 0.5 (ValueError for anything else)."""
    if loss == CE:
        return 0.0
    head, sep, value = loss.partition("@")
    if head == SCL and sep:
        try:
            lam = float(value)
        except ValueError:
            lam = math.nan
        if 0 < lam <= 1 and scl_loss(lam) == loss:
            return lam
    raise ValueError(f"not a loss of {NAME}: {loss!r} (ce, or ce+scl@<λ in (0, 1]>)")


def loss_overrides(loss: str) -> list[str]:
    """The ``--set`` items of a loss: CE is λ = 0 (the same code, the SupCon part weighted 0)."""
    lam = loss_lam(loss)
    if lam == 0:
        return ["method_args.lam=0"]
    return [f"method_args.lam={lam:g}", f"method_args.temperature={TEMPERATURE}"]


def loss_label(loss: str) -> str:
    """``"CE"``, ``"CE + SCL (λ 0.5)"``, ``"CE + SCL (λ tuned)"``."""
    if loss == CE:
        return "CE"
    if loss == TUNED:
        return "CE + SCL (λ tuned)"
    return f"CE + SCL (λ {loss_lam(loss):g})"


def lam_grid(lams: Sequence[float]) -> str:
    """``"{0.1, 0.5, 0.9}"``."""
    return "{" + ", ".join(f"{lam:g}" for lam in lams) + "}"


# ------------------------------------------------------------------------------------------- migration


def recorded_lam(record: dict, default: float = LEGACY_LAM) -> float:
    """The λ a record was made with: ``config.lam``, else its ``method_args.lam=`` override, else ``default``."""
    config = record.get("config") or {}
    if config.get("lam") is not None:
        return float(config["lam"])
    for item in config.get("overrides") or []:
        if str(item).startswith("method_args.lam="):
            return float(str(item).partition("=")[2])
    return default


def migrate(store: harness.RecordStore) -> int:
    """Rename the first version's ``<prefix>/ce+scl`` records (one λ, 0.9) to ``<prefix>/ce+scl@<λ>``, λ read
    from the record (``config.lam``); returns how many were renamed (in memory: :func:`load_store` saves).

    The run itself is unchanged (same overrides, steps, evaluation): only its setting name, ``config.loss``
    and a ``renamed_from`` field change. A record whose new name is already taken for its seed is left alone.
    """
    renamed = 0
    for record in store.records:
        prefix, sep, loss = str(record.get("setting", "")).partition("/")
        if not sep or loss != SCL:
            continue
        lam = recorded_lam(record)
        target = f"{prefix}/{scl_loss(lam)}"
        if store.has(target, record["seed"]):
            continue
        record["setting"] = target
        record["renamed_from"] = f"{prefix}/{SCL}"
        config = record.get("config")
        if isinstance(config, dict) and config.get("loss") == SCL:
            config["loss"] = scl_loss(lam)
        renamed += 1
    return renamed


def load_store(name: str, results_dir: str | Path) -> harness.RecordStore:
    """The experiment's records, old ``ce+scl`` settings renamed (:func:`migrate`) and saved back if any were."""
    store = harness.RecordStore(name, results_dir)
    renamed = migrate(store)
    if renamed:
        store.save()
        print(f"[{name}] renamed {renamed} record(s) <prefix>/{SCL} -> <prefix>/{SCL}@<λ> in {store.path}",
              flush=True)
    return store


# -------------------------------------------------------------------------------------------- settings


def setting_name(n: int, loss: str) -> str:
    return f"n{n}/{loss}"


def parse_setting(setting: str) -> tuple[int, str]:
    """``"n20/ce+scl@0.5"`` -> ``(20, "ce+scl@0.5")``."""
    size, _, loss = setting.partition("/")
    try:
        if not size.startswith("n"):
            raise ValueError(size)
        n = int(size[1:])
        loss_lam(loss)
    except ValueError:
        raise ValueError(f"not a setting of {NAME}: {setting!r}") from None
    return n, loss


def per_size(values: Sequence[int], sizes: Sequence[int], option: str, defaults: dict[int, int]) -> dict[int, int]:
    """``--steps`` / ``--eval-every``: one value for every N, one per N (aligned with --sizes), or the defaults."""
    if not values:
        missing = [n for n in sizes if n not in defaults]
        if missing:
            raise SystemExit(f"{option}: no default for N = {missing}; give {option} for every --sizes value")
        return {n: defaults[n] for n in sizes}
    if len(values) == 1:
        return {n: values[0] for n in sizes}
    if len(values) != len(sizes):
        raise SystemExit(f"{option}: give one value, or one per --sizes value ({len(sizes)}); got {len(values)}")
    return dict(zip(sizes, values, strict=True))


def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """Draws outermost (a partial sitting still covers every N and λ), then N, then CE, CE+SCL per λ."""
    return [(setting_name(n, loss), draw) for draw in draws(args) for n in args.sizes for loss in losses(args.lams)]


def draws(args: argparse.Namespace) -> list[int]:
    return list(range(1, args.draws + 1))


def run_folder(args: argparse.Namespace, setting: str, seed: int) -> Path:
    n, loss = parse_setting(setting)
    return Path(args.runs) / NAME / f"n{n}-{loss.replace('+', '-').replace('@', '-')}" / f"draw-{seed}"


def overrides(args: argparse.Namespace, setting: str, seed: int) -> list[str]:
    """The ``--set`` list of one draw of one setting (everything but these is the recipe's)."""
    n, loss = parse_setting(setting)
    steps, eval_every = args.steps_per_size[n], args.eval_every_per_size[n]
    sets = [
        f"output_dir={run_folder(args, setting, seed)}",
        f"method_args.seeds=[{seed}]",
        f"data.few_shot={n}",
        f"train.max_steps={steps}",
        f"train.eval_every={eval_every}",
        f"train.save_every={steps}",  # one checkpoint, at the end
        f"train.log_every={max(1, min(10, steps))}",
        "train.keep_last=1",
        "train.overwrite=true",
        "train.progress_bar=false",
        "train.report_to=[]",
        "method_args.head=linear",  # the head the recorded runs had (the default is now the paper's dense_tanh)
        *loss_overrides(loss),
    ]
    if args.eval_limit:
        sets.append(f"eval.limit={args.eval_limit}")  # smoke tests only: changes the validation/test split
    return sets


def run_seconds(n: int, steps: int, eval_every: int) -> float:
    """Seconds of one SST-2 run of ``n`` examples on 2 quiet cores by the cost model (``experiments/cost.py``)."""
    mean_batch = n / math.ceil(n / BATCH_SIZE)
    evals = math.ceil(steps / eval_every) + 1  # the validation passes, then the test rows once
    step = cost.STEP_S + cost.train_seconds(mean_batch, cost.tokens("sst2"))
    return cost.LOAD_S + cost.SAVE_S + steps * step + evals * cost.dev_seconds("sst2", SPLIT_ROWS)


def reference_seconds(args: argparse.Namespace, setting: str) -> float:
    """Seconds of one run of ``setting`` at its N's steps and evaluations (:func:`run_seconds`)."""
    n, _ = parse_setting(setting)
    return run_seconds(n, args.steps_per_size[n], args.eval_every_per_size[n])


# ---------------------------------------------------------------------------------------------- running


def clean(value):
    """JSON-safe: NaN / inf become None, numpy scalars Python numbers, dict keys strings."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def draw_record(summary: dict, seed: int, task: str = "sst2") -> dict:
    """The metrics of one draw from the recipe's summary (``runs[<seed>]``: its metrics.json) and its log."""
    from contrastext import read_log

    run = summary["runs"][str(seed)]
    report = run.get("report") or {}
    test = report.get("test_metrics") or {}
    validation_key, test_key = f"{task}_validation_accuracy", f"{task}_test_accuracy"
    if validation_key not in run["metrics"] or test_key not in test:
        raise RuntimeError(
            f"draw {seed}: {validation_key} or {test_key} missing from the recipe's result (keys: "
            f"{sorted(run['metrics'])}, test: {sorted(test)}); was the protocol validation_test?"
        )
    log = read_log(run["log_path"])
    curve = [[r["step"], r[f"eval/{validation_key}"]] for r in log if f"eval/{validation_key}" in r]
    losses = [r for r in log if "loss" in r]
    last = losses[-1] if losses else {}
    metrics = {
        VALIDATION_KEY: float(run["metrics"][validation_key]),
        TEST_KEY: float(test[test_key]),
        "test_f1": test.get(f"{task}_test_f1"),
        "best_step": run.get("best_step"),
        "last_step": run.get("last_step"),
        "last_validation_accuracy": curve[-1][1] if curve else None,
        "validation_curve": curve,
        "last_loss_ce": last.get("loss/ce"),
        "last_loss_supcon": last.get("loss/supcon"),
        "n_train": report.get("n_train"),
        "train_label_counts": report.get("train_label_counts"),
        "labels_flipped": report.get("labels_flipped"),
        "n_validation": report.get("n_validation"),
        "n_test": report.get("n_test"),
    }
    return clean(metrics)


def run_scl(
    args: argparse.Namespace, experiment: str, sets: list[str], seed: int, folder: Path
) -> tuple[dict, dict]:
    """Run the ``scl`` recipe for one draw with ``sets``; ``(config record, metrics)``; the folder is removed."""
    from contrastext import load_config, recipe_path, run_recipe

    config = load_config(recipe_path(RECIPE), sets)
    summary = run_recipe(config, data_root=Path(args.data_root))
    metrics = draw_record(summary, seed)
    if not args.keep_runs:
        shutil.rmtree(folder, ignore_errors=True)
    record = {
        "recipe": RECIPE,
        "overrides": sets,
        "command": f"contrastext train {RECIPE} --data-root {args.data_root} "
        + " ".join(f'--set "{s}"' for s in sets),
        "experiment": experiment,
    }
    return record, metrics


def run_one(args: argparse.Namespace) -> Callable[[str, int], tuple[dict, dict]]:
    def one(setting: str, seed: int) -> tuple[dict, dict]:
        n, loss = parse_setting(setting)
        record, metrics = run_scl(args, NAME, overrides(args, setting, seed), seed, run_folder(args, setting, seed))
        record.update(
            n=n,
            loss=loss,
            lam=loss_lam(loss),
            temperature=TEMPERATURE,
            max_steps=args.steps_per_size[n],
            eval_every=args.eval_every_per_size[n],
        )
        return record, metrics

    return one


# --------------------------------------------------------------------------------------------- statistics


def per_draw(store: harness.RecordStore, setting: str) -> dict[int, dict[str, float]]:
    """``draw -> {validation_accuracy, test_accuracy}`` of the recorded draws of a setting, by draw."""
    validation, test = store.values(setting, VALIDATION_KEY), store.values(setting, TEST_KEY)
    return {s: {VALIDATION_KEY: validation[s], TEST_KEY: test[s]} for s in sorted(set(validation) & set(test))}


def tuned_draws(store: harness.RecordStore, prefix: str, lams: Sequence[float]) -> dict[int, dict]:
    """Tuned CE+SCL of ``prefix`` (``"n20"``, ``"p40"``): ``draw -> {"lam", validation_accuracy,
    test_accuracy, "best_step"}``.

    Per draw, among the λ of ``lams`` (every one must be recorded for the draw, else the draw is left out), the λ
    with the best VALIDATION accuracy (ties → the smaller λ), and that run's TEST accuracy: the paper tunes λ on
    validation, never on test.
    """
    grid = sorted(lams)
    if not grid:
        return {}
    runs = {lam: per_draw(store, f"{prefix}/{scl_loss(lam)}") for lam in grid}
    complete = set.intersection(*(set(found) for found in runs.values()))
    tuned = {}
    for draw in sorted(complete):
        lam = min(grid, key=lambda value: (-runs[value][draw][VALIDATION_KEY], value))
        record = store.get(f"{prefix}/{scl_loss(lam)}", draw) or {}
        tuned[draw] = {
            "lam": lam,
            VALIDATION_KEY: runs[lam][draw][VALIDATION_KEY],
            TEST_KEY: runs[lam][draw][TEST_KEY],
            "best_step": (record.get("metrics") or {}).get("best_step"),
        }
    return tuned


def draws_of(store: harness.RecordStore, setting: str, lams: Sequence[float] = LAMS) -> dict[int, dict[str, float]]:
    """:func:`per_draw` of a run setting, or of the tuned CE+SCL (``"<prefix>/ce+scl@tuned"``)."""
    prefix, _, loss = setting.partition("/")
    if loss == TUNED:
        return {
            draw: {VALIDATION_KEY: values[VALIDATION_KEY], TEST_KEY: values[TEST_KEY]}
            for draw, values in tuned_draws(store, prefix, lams).items()
        }
    return per_draw(store, setting)


def values_reader(store: harness.RecordStore, lams: Sequence[float] = LAMS) -> Callable[[str, str], dict[int, float]]:
    """``values(setting, key) -> {draw: value}`` for :func:`harness.compare`, tuned CE+SCL included."""

    def values(setting: str, key: str) -> dict[int, float]:
        prefix, _, loss = setting.partition("/")
        if loss == TUNED:
            return {draw: float(v[key]) for draw, v in tuned_draws(store, prefix, lams).items()}
        return store.values(setting, key)

    return values


def top_k(store: harness.RecordStore, setting: str, k: int = TOP_K, lams: Sequence[float] = LAMS) -> dict | None:
    """The paper's figure over the recorded draws of a setting, or of tuned CE+SCL (None without draws)."""
    from contrastext.runs.scl import top_k_by_validation

    draws_ = draws_of(store, setting, lams)
    if not draws_:
        return None
    return top_k_by_validation(draws_, VALIDATION_KEY, TEST_KEY, k)


def task_level_lam(store: harness.RecordStore, prefix: str, lams: Sequence[float]) -> float | None:
    """One λ for all draws of ``prefix``: the highest mean validation accuracy of its top 3 draws (the
    criterion ``contrastext.runs.scl.top_k_by_validation`` reports as ``validation_mean``); ties → the smaller
    λ; None unless every λ has a draw."""
    scores = {}
    for lam in sorted(lams):
        figure = top_k(store, f"{prefix}/{scl_loss(lam)}", lams=lams)
        if figure is None:
            return None
        scores[lam] = figure["validation_mean"]
    return min(scores, key=lambda lam: (-scores[lam], lam)) if scores else None


def picks(tuned: dict[int, dict]) -> str:
    """``"λ 0.1 ×3, 0.5 ×7"``: how often each λ was picked."""
    counts = collections.Counter(v["lam"] for v in tuned.values())
    return "λ " + ", ".join(f"{lam:g} ×{counts[lam]}" for lam in sorted(counts)) if counts else ""


def fmt_top(figure: dict | None, digits: int = 1) -> str:
    if figure is None:
        return "–"
    return f"{figure['mean']:.{digits}f} ± {figure['std']:.{digits}f} (top {figure['top_k']})"


# ---------------------------------------------------------------------------------------- chance level


@functools.lru_cache(maxsize=8)
def test_label_counts(data_root: str, eval_limit: int | None = None) -> tuple[tuple[str, int], ...]:
    """``((label, count), ...)`` of the test rows, made exactly as the recipe makes them
    (``contrastext.runs.scl.load_data``: SST-2 dev split by ``split_validation_test`` with the recipe's
    ``validation_size``, ``test_share`` and ``split_seed``). The same for every run, draw and flip rate (the
    test rows are clean). Raises ContrastextError / OSError when SST-2 cannot be read."""
    from contrastext import load_config, recipe_path
    from contrastext.runs.scl import SCLArgs, load_data

    sets = [] if not eval_limit else [f"eval.limit={eval_limit}"]
    config = load_config(recipe_path(RECIPE), sets)
    data = load_data(config, config.method_args_as(SCLArgs), Path(data_root))
    counts = collections.Counter(str(example.label) for example in data.test or [])
    return tuple(sorted(counts.items()))


def majority_share(args: argparse.Namespace) -> tuple[float | None, str]:
    """``(share, sentence)``: the percentage of the test rows in the majority class (the accuracy of always
    answering it: chance level here) and a sentence for the report; ``(None, why)`` without SST-2."""
    from contrastext import ContrastextError

    try:
        counts = dict(test_label_counts(str(args.data_root), args.eval_limit))
    except (ContrastextError, OSError) as error:
        return None, (
            f"Chance level unknown: the test rows' labels could not be read under `{args.data_root}` "
            f"({type(error).__name__}); no setting is flagged at chance."
        )
    total = sum(counts.values())
    if not total:
        return None, "Chance level unknown: the recipe's split has no test rows; no setting is flagged at chance."
    share = 100.0 * max(counts.values()) / total
    held = ", ".join(f"{count} of label {label}" for label, count in counts.items())
    return share, (
        f"Chance level: the {total} test rows hold {held}, so always answering the majority class scores "
        f"{share:.1f} %. A setting whose mean test accuracy is within {CHANCE_MARGIN:g} points of that, or "
        "below, is flagged **at chance**."
    )


def at_chance(values: Sequence[float], share: float | None) -> bool:
    """Mean within ``CHANCE_MARGIN`` points of the majority-class share, or below it."""
    return bool(values) and share is not None and statistics.fmean(values) <= share + CHANCE_MARGIN


def chance_losses(store: harness.RecordStore, settings: Sequence[str], share: float | None,
                  lams: Sequence[float] = LAMS) -> list[str]:
    """The labels (``"CE"``, ``"CE + SCL (λ tuned)"``, ...) of those ``settings`` that are at chance."""
    read = values_reader(store, lams)
    return [
        loss_label(setting.partition("/")[2])
        for setting in settings
        if at_chance(list(read(setting, TEST_KEY).values()), share)
    ]


def chance_note(names: Sequence[str], share: float | None) -> str:
    """``"; CE is at chance (…)"`` for a verdict line, or ``""``."""
    if not names or share is None:
        return ""
    verb = "is" if len(names) == 1 else "are"
    return (
        f"; {' and '.join(names)} {verb} at chance (mean test accuracy within {CHANCE_MARGIN:g} points of the "
        f"majority-class share {share:.1f} %, or below)"
    )


# ---------------------------------------------------------------------------------------------- verdicts


def unpaired_interval(a: Sequence[float], b: Sequence[float], resamples: int = 10_000, seed: int = 0):
    """Percentile bootstrap 95 % interval of mean(a) − mean(b), resampling each group on its own."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size < 2 or b.size < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means_a = a[rng.integers(0, a.size, (resamples, a.size))].mean(axis=1)
    means_b = b[rng.integers(0, b.size, (resamples, b.size))].mean(axis=1)
    low, high = np.percentile(means_a - means_b, [2.5, 97.5])
    return float(low), float(high)


def differences(comparison: harness.Comparison) -> list[float]:
    return [t - b for t, b in zip(comparison.treatment_values, comparison.baseline_values, strict=True)]


def comparisons(store: harness.RecordStore, sizes: Sequence[int],
                lams: Sequence[float] = LAMS) -> dict[int, harness.Comparison]:
    """Tuned CE+SCL vs CE per N, paired by draw (draws with every λ recorded)."""
    read = values_reader(store, lams)
    return {
        n: harness.compare(store, setting_name(n, TUNED), setting_name(n, CE), TEST_KEY, 1, values=read)
        for n in sizes
    }


def lam_comparisons(store: harness.RecordStore, sizes: Sequence[int],
                    lams: Sequence[float] = LAMS) -> dict[int, dict[float, harness.Comparison]]:
    """Each fixed λ vs CE per N, paired by draw (secondary)."""
    return {
        n: {lam: harness.compare(store, setting_name(n, scl_loss(lam)), setting_name(n, CE), TEST_KEY, 1)
            for lam in lams}
        for n in sizes
    }


def gain_trend(found: dict[int, harness.Comparison]) -> tuple[str, str]:
    """The "largest gain at the smallest N" part: ``(verdict, text)``."""
    sizes = sorted(found)
    smallest = sizes[0]
    if len(sizes) < 2:
        return "not tested", "needs two or more N"
    if any(len(found[n].seeds) < 2 for n in sizes):
        return "not enough seeds", "needs ≥ 2 paired draws at every N"
    parts, verdicts = [], []
    for n in sizes[1:]:
        low, high = unpaired_interval(differences(found[smallest]), differences(found[n]))
        gap = found[smallest].mean_difference - found[n].mean_difference
        verdicts.append(low > 0)
        parts.append(f"Δ({smallest}) − Δ({n}) = {gap:+.2f}, 95 % CI [{low:+.2f}, {high:+.2f}]")
    verdict = "reproduced" if all(verdicts) else "not reproduced at this scale"
    return verdict, "; ".join(parts) + " (unpaired bootstrap over draws)"


# ---------------------------------------------------------------------------------------------- report


def report(store: harness.RecordStore, args: argparse.Namespace) -> str:
    migrate(store)  # records of the first version, if the store was not loaded with load_store
    sizes, lams = list(args.sizes), list(args.lams)
    share, chance_text = majority_share(args)
    found = comparisons(store, sizes, lams)
    per_lam = lam_comparisons(store, sizes, lams)
    steps, every = args.steps_per_size, args.eval_every_per_size
    lines = [
        "## SCL (Gunel et al., ICLR 2021): few-shot SST-2, CE vs CE + SCL",
        "",
        f"**Claim** (§5.2, Table 4): “{CLAIM}” And §1: “We obtain strong improvements on few-shot learning "
        "settings (20, 100, 1000 labeled examples) as shown in Table 4, leading up to 10.7% improvement for 20 "
        "labeled examples.”",
        "",
        "**Paper's numbers** (Table 4, SST-2, RoBERTa-large; mean ± std of the test accuracy of the top 3 of 10 "
        "draws by validation accuracy; CE + SCL with the paper's tuned λ, τ):",
        "",
        harness.markdown_table(
            ["N", "CE", "CE + SCL", "Δ"],
            [
                [n, f"{PAPER[n]['ce'][0]} ± {PAPER[n]['ce'][1]}", f"{PAPER[n]['ce+scl'][0]} ± {PAPER[n]['ce+scl'][1]}",
                 f"{PAPER[n]['ce+scl'][0] - PAPER[n]['ce'][0]:+.1f}"]
                for n in SIZES
            ],
        ),
        "**Protocol and sizes, ours vs the paper's.**",
        "",
        harness.markdown_table(
            ["", "paper (§4.1)", "ours"],
            [
                ["encoder", "RoBERTa-large (355M), fairseq", "all-MiniLM-L6-v2 (22M), [CLS] + dropout 0.1 + linear head"],
                ["N (in total, following the training label distribution)", "20, 100, 1000",
                 ", ".join(str(n) for n in sizes)],
                ["training-set draws per N", "10", str(args.draws)],
                ["validation / test", "~500 rows / half of GLUE dev, by label distribution",
                 "436 / 436 disjoint rows of SST-2 dev (stratified, split seed 0), the same for every draw and run"],
                ["optimiser", "Adam, lr 1e-5, batch 16, dropout 0.1", "same (AdamW without decay; constant lr, no "
                 "warmup, no clipping: not given)"],
                ["training length", "not given (early stopping “at various epochs”)",
                 "; ".join(f"N = {n}: {steps[n]} steps ({_epochs(n, steps[n])}), validation every {every[n]}"
                           for n in sizes) + "; the checkpoint with the best validation accuracy is scored on test"],
                ["λ", "“a scalar weighting hyperparameter that we tune for each downstream task” (§2); neither the "
                 "grid nor the values are reported",
                 f"tuned on validation per draw from {lam_grid(lams)} (the paper tunes λ per task; grid not given): "
                 "each λ is one run per draw, and per draw the λ with the best validation accuracy (ties → the "
                 "smaller) gives its test accuracy; CE is λ = 0 (the same code, the SupCon part weighted 0)"],
                ["τ", "tuned, not reported", f"{TEMPERATURE:g} (the recipe's), fixed"],
                ["L_SCL", "Σ over the batch (Eq. 3)", "same (`supcon_reduction: sum`)"],
                ["max length", "not given", "64 tokens (covers SST-2)"],
                ["reported figure", "top 3 of 10 draws by validation: mean ± std of test accuracy",
                 "the same over the recorded draws (tuned CE + SCL: over its per-draw picks), beside the mean ± std "
                 "of all draws; the verdict uses the paired per-draw differences tuned CE + SCL − CE (every draw "
                 "with all λ recorded)"],
            ],
        ),
        "all-MiniLM-L6-v2 is already sentence-tuned (contrastive training on ~1B sentence pairs, with mean "
        "pooling): its embedding space already clusters sentences by meaning, so a supervised contrastive term has "
        "less structure left to add than on RoBERTa-large's masked-LM features, and its [CLS] vector (the paper's "
        "Φ) is not the vector it was tuned to produce. It is also 16× smaller. Absolute accuracies and gaps "
        "measured with it are therefore not the paper's; the question is only whether the direction of the gap "
        "(and its shrinking with N) shows at this scale. With λ near 1 the cross-entropy part that trains the "
        "classifier head weighs only 1 − λ (0.1 at λ = 0.9): at lr 1e-5 and these training lengths such a head "
        "may stay near chance, which is why λ is tuned here rather than fixed.",
        "",
        "**Our results** (test accuracy ×100 on the 436 test rows, checkpoint selected on validation):",
        "",
        chance_text,
        "",
        _results_table(store, sizes, lams, share),
        _delta_table(store, sizes, lams, found),
    ]
    for n in sizes:
        c = found[n]
        if len(c.seeds) >= 2:
            names = chance_losses(store, [setting_name(n, TUNED), setting_name(n, CE)], share, lams)
            text = c.text(digits=2) + chance_note(names, share)
        else:
            text = f"not enough seeds ({len(c.seeds)} paired draw(s) with every λ of {lam_grid(lams)} recorded)"
        lines += [f"**Verdict:** N = {n} (CE + SCL with λ tuned on validation per draw): {text}.", ""]
        lines += [f"Per λ (fixed, N = {n}; secondary, not verdicts):", ""]
        for lam in lams:
            setting = setting_name(n, scl_loss(lam))
            c_lam = per_lam[n][lam]
            if len(c_lam.seeds) >= 2:
                names = chance_losses(store, [setting, setting_name(n, CE)], share, lams)
                body = c_lam.text(digits=2) + chance_note(names, share)
            else:
                body = f"not enough seeds ({len(c_lam.seeds)} paired draw(s))"
            lines.append(
                f"- λ = {lam:g}: {body}; top 3 by validation {fmt_top(top_k(store, setting, lams=lams))} vs CE "
                f"{fmt_top(top_k(store, setting_name(n, CE), lams=lams))}."
            )
        one = task_level_lam(store, f"n{n}", lams)
        if one is not None:
            lines.append(
                f"- One λ for all draws instead (the highest mean validation accuracy of the top 3 draws): "
                f"λ = {one:g}."
            )
        lines.append("")
    trend_verdict, trend_text = gain_trend(found)
    point = ", ".join(
        f"Δ({n}) = {found[n].mean_difference:+.2f}" for n in sizes if found[n].seeds
    ) or "no paired draws"
    floor = [
        f"{name} at N = {n}"
        for n in sizes
        for name in chance_losses(store, [setting_name(n, TUNED), setting_name(n, CE)], share, lams)
    ]
    floor_text = f"; at chance: {', '.join(floor)}" if floor else ""
    lines += [
        f"**Verdict:** largest gain at the smallest N (λ tuned): {point}; {trend_text} → {trend_verdict}"
        f"{floor_text}.",
        "",
        f"![SST-2 test accuracy vs N, CE and CE + SCL]({NAME}.png)",
        "",
        f"Command: `{harness.command(NAME, args, _extra(args))}` (resumable: finished draws are read back from "
        f"`docs/results/{NAME}.json` and skipped). Planned: {len(plan(args))} runs ({len(sizes)} N × (CE + {len(lams)} λ) × "
        f"{args.draws} draws), ≈ {cost.plan_minutes(reference_seconds, args, plan(args)):.0f} min on 2 quiet "
        "cores; recorded: "
        f"{_recorded(store, args)}.",
        "",
    ]
    return "\n".join(lines)


def _epochs(n: int, steps: int) -> str:
    epochs = steps / math.ceil(n / BATCH_SIZE)
    return f"{epochs:.0f} epochs" if epochs >= 3 else f"{epochs:.1f} epochs"


def _done(store: harness.RecordStore, args: argparse.Namespace) -> tuple[int, int]:
    planned = plan(args)
    return sum(store.has(s, seed) for s, seed in planned), len(planned)


def _recorded(store: harness.RecordStore, args: argparse.Namespace) -> str:
    done, planned = _done(store, args)
    complete = ", ".join(
        f"N = {n}: {len(tuned_draws(store, f'n{n}', args.lams))}/{args.draws}" for n in args.sizes
    )
    return f"{done}/{planned} runs; draws with every λ recorded (those tuned CE + SCL uses): {complete}"


def _extra(args: argparse.Namespace) -> str:
    """The non-default options of this sitting (for the command line in the report)."""
    parts = []
    if list(args.sizes) != list(SIZES):
        parts.append("--sizes " + " ".join(str(n) for n in args.sizes))
    if args.draws != DRAWS:
        parts.append(f"--draws {args.draws}")
    if list(args.lams) != list(LAMS):
        parts.append("--lams " + " ".join(f"{lam:g}" for lam in args.lams))
    if args.steps:
        parts.append("--steps " + " ".join(str(s) for s in args.steps))
    if args.eval_every:
        parts.append("--eval-every " + " ".join(str(s) for s in args.eval_every))
    if args.eval_limit:
        parts.append(f"--eval-limit {args.eval_limit}")
    return " ".join(parts)


def _best_steps(store: harness.RecordStore, setting: str, lams: Sequence[float]) -> list[float]:
    prefix, _, loss = setting.partition("/")
    if loss == TUNED:
        steps = [v["best_step"] for v in tuned_draws(store, prefix, lams).values()]
    else:
        steps = [r["metrics"].get("best_step") for r in store.records if r["setting"] == setting]
    return [s for s in steps if s is not None]


def _results_table(store: harness.RecordStore, sizes: Sequence[int], lams: Sequence[float],
                   share: float | None) -> str:
    read = values_reader(store, lams)
    rows = []
    for n in sizes:
        for loss in [*losses(lams), TUNED]:
            setting = setting_name(n, loss)
            test = list(read(setting, TEST_KEY).values())
            validation = list(read(setting, VALIDATION_KEY).values())
            best_steps = _best_steps(store, setting, lams)
            paper = PAPER.get(n, {}).get({CE: "ce", TUNED: "ce+scl"}.get(loss, ""))
            notes = []
            if loss == TUNED and test:
                notes.append(picks(tuned_draws(store, f"n{n}", lams)))
            if at_chance(test, share):
                notes.append("**at chance**")
            rows.append([
                n,
                loss_label(loss),
                f"{paper[0]} ± {paper[1]}" if paper else "–",
                fmt_top(top_k(store, setting, lams=lams)),
                harness.fmt_mean_std(test, digits=1),
                harness.fmt_mean_std(validation, digits=1),
                f"{statistics.median(best_steps):g}" if best_steps else "–",
                "; ".join(notes),
            ])
    return harness.markdown_table(
        ["N", "loss", "paper (top 3 of 10)", "ours: top 3 by validation", "ours: all draws (n)",
         "ours: validation acc, all draws", "selected step (median)", "note"],
        rows,
    )


def _delta_table(store: harness.RecordStore, sizes: Sequence[int], lams: Sequence[float],
                 found: dict[int, harness.Comparison]) -> str:
    rows = []
    for n in sizes:
        c = found[n]
        ce, scl = top_k(store, setting_name(n, CE), lams=lams), top_k(store, setting_name(n, TUNED), lams=lams)
        paper = PAPER.get(n)
        rows.append([
            n,
            f"{paper['ce+scl'][0] - paper['ce'][0]:+.1f}" if paper else "–",
            f"{scl['mean'] - ce['mean']:+.2f}" if ce and scl else "–",
            f"{c.mean_difference:+.2f}" if c.seeds else "–",
            f"[{c.low:+.2f}, {c.high:+.2f}]" if len(c.seeds) >= 2 else "–",
            len(c.seeds),
            c.verdict,
        ])
    return harness.markdown_table(
        ["N", "paper Δ (top 3)", "ours Δ, λ tuned (top 3)", "ours Δ, λ tuned, paired by draw (mean)",
         "95 % bootstrap CI", "draws", "verdict"],
        rows,
    )


def summary(store: harness.RecordStore, args: argparse.Namespace | None = None) -> dict:
    args = args or parse_args([])
    migrate(store)
    done, planned = _done(store, args)
    found = comparisons(store, args.sizes, args.lams)
    verdicts = {n: found[n].verdict for n in args.sizes}
    if done < planned:
        complete = ", ".join(f"N={n} {len(found[n].seeds)}/{args.draws}" for n in args.sizes)
        verdict = f"partial: {done}/{planned} runs (draws with every λ: {complete})"
    elif all(v == "reproduced" for v in verdicts.values()):
        verdict = "reproduced" if gain_trend(found)[0] == "reproduced" else "reproduced (gain not largest at N = 20)"
    elif all(v != "reproduced" for v in verdicts.values()):
        verdict = "not reproduced at this scale"
    else:
        verdict = "partly: " + ", ".join(
            f"N = {n} {'✓' if v == 'reproduced' else '✗'}" for n, v in verdicts.items()
        )
    numbers = "; ".join(
        f"N={n}: Δ {found[n].mean_difference:+.1f} [{found[n].low:+.1f}, {found[n].high:+.1f}] (n={len(found[n].seeds)})"
        if len(found[n].seeds) >= 2 else f"N={n}: –"
        for n in args.sizes
    )
    share, _ = majority_share(args)
    floor = [
        f"{name} at N={n}"
        for n in args.sizes
        for name in chance_losses(store, [setting_name(n, TUNED), setting_name(n, CE)], share, args.lams)
    ]
    return {
        "paper": "Gunel et al., ICLR 2021 (SCL)",
        "claim": "CE+SCL beats CE on few-shot SST-2 (N = 20, 100, 1000), most at N = 20 (+2.2)",
        "verdict": verdict,
        "numbers": f"test acc CE+SCL (λ tuned per draw from {lam_grid(args.lams)}) − CE, all draws: " + numbers
        + (f"; at chance: {', '.join(floor)}" if floor else ""),
    }


# ------------------------------------------------------------------------------------------------- plot


def series_style(loss: str, lams: Sequence[float]) -> tuple[str, float]:
    """``(colour, x shift)`` of a loss in the plots: CE blue, fixed λ in greens/oranges, tuned red."""
    order = [*losses(lams), TUNED]
    palette = ["tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]
    colours = {CE: "tab:blue", TUNED: "tab:red"}
    for index, lam in enumerate(lams):
        colours[scl_loss(lam)] = palette[index % len(palette)]
    width = 0.5 / max(1, len(order) - 1)
    return colours[loss], (order.index(loss) - (len(order) - 1) / 2) * width


def plot(store: harness.RecordStore, args: argparse.Namespace, path: Path) -> Path:
    """Test accuracy vs N (one column per N): all-draws mean ± std (filled) of CE, each λ and tuned CE + SCL;
    top-3 mean ± std (hollow) of CE and tuned CE + SCL; the paper's Table 4 (faint crosses); chance level."""
    lams = list(args.lams)
    read = values_reader(store, lams)
    share, _ = majority_share(args)
    plt = harness.pyplot()
    figure, ax = plt.subplots(figsize=(6.4, 5.4))
    for loss in [*losses(lams), TUNED]:
        colour, shift = series_style(loss, lams)
        headline = loss in (CE, TUNED)
        name = loss_label(loss) + (f", τ {TEMPERATURE:g}" if loss != CE else "")
        points, tops, paper = [], [], []
        for index, n in enumerate(args.sizes):
            values = list(read(setting_name(n, loss), TEST_KEY).values())
            if values:
                points.append((index + shift, *harness.mean_std(values)))
            figure_ = top_k(store, setting_name(n, loss), lams=lams) if headline else None
            if figure_:
                tops.append((index + shift + 0.03, figure_["mean"], figure_["std"]))
            key = {CE: "ce", TUNED: "ce+scl"}.get(loss)
            if key and n in PAPER:
                paper.append((index, PAPER[n][key][0]))
        if points:
            ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=[p[2] for p in points], color=colour,
                        marker="o", capsize=3, alpha=1.0 if headline else 0.6, label=f"{name}: all draws")
        if tops:
            ax.errorbar([p[0] for p in tops], [p[1] for p in tops], yerr=[p[2] for p in tops], color=colour,
                        marker="D", markerfacecolor="white", linestyle=":", capsize=3,
                        label=f"{name}: top 3 by validation")
        if paper:
            ax.plot([p[0] for p in paper], [p[1] for p in paper], color=colour, alpha=0.35, marker="x",
                    linestyle="--", label=f"paper {'CE' if loss == CE else 'CE + SCL'} (RoBERTa-large, top 3)")
    if share is not None:
        ax.axhline(share, color="grey", linestyle=":", linewidth=1, label=f"majority class (chance), {share:.1f}")
    ax.set_xticks(range(len(args.sizes)))
    ax.set_xticklabels([str(n) for n in args.sizes])
    ax.set_xlim(-0.5, len(args.sizes) - 0.5)
    ax.set_xlabel("N training examples (in total)")
    ax.set_ylabel("SST-2 test accuracy ×100")
    ax.set_title("SCL few-shot SST-2 (all-MiniLM-L6-v2), mean ± std over draws", fontsize="medium")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="xx-small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


# ---------------------------------------------------------------------------------------- command line


def parse_lams(values: Sequence[float]) -> list[float]:
    """``--lams``: distinct values in (0, 1] (as written with ``:g``), ascending."""
    lams = sorted({float(f"{lam:g}") for lam in values})
    if not lams or any(not 0 < lam <= 1 for lam in lams):
        raise SystemExit(f"--lams: give values in (0, 1]; got {list(values)}")
    return lams


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = harness.parser(__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="N values (default %(default)s)")
    p.add_argument("--draws", type=int, default=DRAWS, help="training-set draws per N (seeds 1..D; default 10)")
    p.add_argument("--lams", type=float, nargs="+", default=list(LAMS),
                   help="the λ grid of CE+SCL, tuned on validation per draw in the report (default %(default)s)")
    p.add_argument("--steps", type=int, nargs="*", default=[],
                   help=f"max_steps: one for every N or one per --sizes value (default {STEPS})")
    p.add_argument("--eval-every", type=int, nargs="*", default=[],
                   help=f"validation every k steps: one value or one per N (default {EVAL_EVERY})")
    p.add_argument("--eval-limit", type=int, default=None,
                   help="smoke tests only: first rows of SST-2 dev (changes the validation/test split)")
    p.add_argument("--keep-runs", action="store_true", help="keep each draw's run folder (weights, ~600 MB)")
    args = p.parse_args(argv)
    if args.draws < 1:
        raise SystemExit("--draws must be ≥ 1")
    args.lams = parse_lams(args.lams)
    args.steps_per_size = per_size(args.steps, args.sizes, "--steps", STEPS)
    args.eval_every_per_size = per_size(args.eval_every, args.sizes, "--eval-every", EVAL_EVERY)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    store = load_store(NAME, args.results)
    left = 0
    if not args.report_only:
        print(
            f"[{NAME}] plan: {len(plan(args))} runs ({len(args.sizes)} N × (CE + CE+SCL at λ "
            f"{lam_grid(args.lams)}) × {args.draws} draws), "
            f"≈ {cost.plan_minutes(reference_seconds, args, plan(args)):.0f} min on 2 quiet cores",
            flush=True,
        )
        reference = functools.partial(reference_seconds, args)
        left = harness.run_plan(store, plan(args), run_one(args), harness.Budget(args.budget_minutes), reference)
    path = harness.write_report(store, report(store, args))
    png = plot(store, args, Path(args.results) / f"{NAME}.png")
    print(f"[{NAME}] wrote {path} and {png}; {left} run(s) left", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
