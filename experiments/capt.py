"""CAPT as continued pre-training of all-MiniLM-L6-v2: MLM alone vs MLM + CAPT, then GLUE fine-tuning.

Luo et al., "Rethinking denoised auto-encoding in language pre-training" (EMNLP 2021; arXiv 2010.06351
"CAPT: Contrastive Pre-Training for Learning Denoised Sequence Representations") claim that adding the
contrast between a sentence and its corrupted copy to MLM pre-training improves GLUE (Table 2: CAPT 89.5 vs
RoBERTa 88.9 dev average), that masking beats shuffling as the corruption (§5.2, Figure 3 right) and that the
inverted-triangle temperature (Eq. 6) beats a tuned constant τ (§5.1, Figure 3 left).

Here all-MiniLM-L6-v2 is further pre-trained on the same wiki1m sentences (recipe ``capt-continued``,
``contrastext.runs.capt``) in four variants, each pre-trained ONCE (pre-training seed 0):

- ``mlm``: MLM only (``method_args.capt_weight=0``: the CAPT loss is still computed and logged but weighs 0,
  so its gradient is exactly zero; the aggregation layer A gets no gradient);
- ``mask``: MLM + CAPT, BERT masking (``corruption=token_mask``, the paper's main setting);
- ``shuffle``: MLM + CAPT, local shuffle with window 3 (``corruption=shuffle``; the MLM reads a separately
  masked copy, a third encoder pass);
- ``mask-fixed``: MLM + CAPT (masking) with a constant τ = 0.1 (``temperature=fixed``): the paper's τ is
  "manually tuned", value not given; 0.1 is our library's default (``CAPTArgs.fixed_temperature``,
  docs/methods/capt.md), not the paper's;

plus the reference ``none`` (all-MiniLM-L6-v2 fine-tuned directly). Every pre-trained encoder (and
``none``) is then fine-tuned on SST-2, MRPC and RTE, 5 fine-tuning seeds each. A fine-tuning seed s draws its
own training subset (``--train-rows`` rows following the training label distribution, seed s), initialises
the fresh head and orders the data; the same s gives the same subset to every variant, so variants are paired
by s. Scores: GLUE dev accuracy (the paper's metric for these three tasks, §3.2 / Table 5), MRPC F1 beside.

Records (``docs/results/capt.json``): ``pretrain/<variant>`` seed 0 (STS-B dev before/after, last losses) and
``<variant>/<task>`` seeds 1..5 (dev accuracy, F1, MCC). The pre-trained encoder of a variant is kept in
``<runs>/capt/pretrained/<variant>/`` and reused by all its fine-tunings (also across sittings); once every
planned fine-tuning of a variant is recorded it is deleted (``--keep-weights`` keeps it). A fine-tuning whose
variant's weights are gone (record present, folder deleted) pre-trains it again (noted in its config).

Why not ``run_recipe`` for the fine-tuning too: ``contrastext.runs.capt.run`` always pre-trains first,
fine-tunes ONE task per run, and its fine-tuning stage forces ``data.few_shot`` off (``finetune_limit`` takes
the first N rows, the same rows for every seed). So pre-training goes through ``run_recipe`` (with
``method_args.finetune_task=null``) and fine-tuning through the run module's own pieces
(``finetune_config``, ``capt_encoder``, ``FineTuneMethod``, ``run_training``), with a seeded draw added.

Cost at the defaults: the reference estimate of ``experiments/cost.py`` (stated in the report, beside the
measured time), for

- pre-training, 300 steps × 32 sentences at length ≤ 64: two encoder passes + the MLM head (three passes for
  shuffle), STS-B dev before and after, and saving;
- fine-tuning, 100 steps × 16 on 1000-row draws, one dev evaluation and the model load, per (variant, task,
  seed): 5 variants × 3 tasks × 5 seeds.

The budget's estimate is scaled by the slowdown seen in the sitting (``harness.Calibration``), and the rest
resumes.

A check of ``none`` seed 1 at these sizes (not a record): SST-2 78.4, MRPC 70.8 (majority 68.4), RTE 50.2
(majority 52.7; 52.7 at lr 1e-4): RTE does not learn at this scale, so its comparisons are mostly noise.

Example::

    python experiments/capt.py --data-root ../shared/data --budget-minutes 90
    python experiments/capt.py --report-only
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost  # noqa: E402
import harness  # noqa: E402

NAME = "capt"
RECIPE = "capt-continued"
PAPER = "CAPT (Luo et al., EMNLP 2021)"
TASKS = ("sst2", "mrpc", "rte")
TASK_TITLES = {"sst2": "SST-2", "mrpc": "MRPC", "rte": "RTE"}
REFERENCE = "none"
# Pre-training variants: their own method_args overrides (the rest is the recipe's).
VARIANTS: dict[str, list[str]] = {
    "mlm": ["method_args.corruption=token_mask", "method_args.capt_weight=0"],
    "mask": ["method_args.corruption=token_mask"],
    "shuffle": ["method_args.corruption=shuffle"],
    "mask-fixed": ["method_args.corruption=token_mask", "method_args.temperature=fixed"],
}
ORDER = (REFERENCE, *VARIANTS)  # fine-tuned settings, in table order
LABELS = {
    "none": "no continued pre-training",
    "mlm": "MLM only",
    "mask": "MLM + CAPT (masking)",
    "shuffle": "MLM + CAPT (shuffling)",
    "mask-fixed": "MLM + CAPT (masking), fixed τ",
}
PRETRAIN_SEED = 0
METRIC = "accuracy"  # §3.2 / Table 5: accuracy for SST-2, MRPC and RTE

# Accuracy of always predicting the dev split's most frequent class (444/872, 279/408, 146/277); MRPC's F1 of
# always predicting "paraphrase" (the positive class): 2·279 / (2·279 + 129).
MAJORITY = {"sst2": 50.92, "mrpc": 68.38, "rte": 52.71, "mrpc_f1": 81.22}
STSB_DEV_PAIRS = 1500

# The paper's numbers (Table 2, large models, 24 layers): dev = "Averaged dev results over 5 random seeds",
# test = "Single-model test results via a leaderboard submission". Avg is over all eight GLUE tasks.
PAPER_TABLE2 = {
    "dev": {
        "BERT": {"sst2": 93.2, "mrpc": 88.0, "rte": 70.4, "avg8": 84.0},
        "RoBERTa": {"sst2": 96.4, "mrpc": 90.9, "rte": 86.6, "avg8": 88.9},
        "CAPT": {"sst2": 96.5, "mrpc": 92.1, "rte": 88.0, "avg8": 89.5},
    },
    "test": {
        "BERT": {"sst2": 94.9, "mrpc": 85.4, "rte": 70.1, "avg8": 83.4},
        "RoBERTa": {"sst2": 96.3, "mrpc": 88.1, "rte": 86.0, "avg8": 87.6},
        "CAPT": {"sst2": 96.8, "mrpc": 88.9, "rte": 86.9, "avg8": 87.9},
    },
}
PAPER_ANALOGUE = {
    "none": "–",
    "mlm": "RoBERTa (MLM only) 96.4 / 90.9 / 86.6",
    "mask": "CAPT 96.5 / 92.1 / 88.0",
    "shuffle": "Fig. 3 right (values not in the text)",
    "mask-fixed": "Fig. 3 left (values not in the text)",
}

CLAIMS = {
    "abstract": (
        "comprehensive empirical evidence on 11 natural language understanding and cross-modal tasks "
        "illustrates that CAPT is applicable for both language and vision-language tasks, and obtains "
        "surprisingly consistent improvement, including 0.6% absolute gain on GLUE benchmarks"
    ),
    "3.3": (
        "CAPT outperforms RoBERTa that is a very strong baseline model on most language understanding "
        "datasets, by 0.3% and 0.6% improvements of average test and dev score."
    ),
    "5.1": (
        "fixing the size of negative samples, adaptive temperature exhibits consistent superiority over "
        "manually tuned constant temperature."
    ),
    "5.2": (
        "It suggests that both masking and shuffling contribute to the improvement of performance over the "
        "baseline which does not perform any corrpution noise to compute contrastive loss. The results also "
        "reveal the superiority of the masking operation over the shuffling operation."
    ),
}

# (treatment, baseline, the claim's words, the paper's place)
COMPARISONS = (
    ("mask", "mlm", "CAPT (masking) > MLM only", "§3.3 / §5.2"),
    ("shuffle", "mlm", "CAPT (shuffling) > MLM only", "§5.2"),
    ("mask", "mask-fixed", "Eq. 6 schedule ≥ fixed τ", "§5.1"),
)


# ------------------------------------------------------------------------------------------- options


def build_parser() -> argparse.ArgumentParser:
    p = harness.parser(__doc__.split("\n\n")[0], budget_minutes=90)
    p.add_argument("--seeds", type=int, default=5, help="fine-tuning seeds 1..N (default %(default)s)")
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS, help="fine-tuning tasks")
    p.add_argument("--pretrain-steps", type=int, default=300, help="continued pre-training steps")
    p.add_argument("--pretrain-batch-size", type=int, default=32, help="sentences per pre-training step")
    p.add_argument("--pretrain-max-length", type=int, default=64, help="tokens per pre-training sentence")
    p.add_argument("--sts-limit", type=int, default=None, help="first N STS-B dev pairs (monitoring); all")
    p.add_argument("--fixed-temperature", type=float, default=0.1, help="τ of mask-fixed (library default)")
    p.add_argument("--train-rows", type=int, default=1000, help="rows drawn from each task's train split")
    p.add_argument("--finetune-steps", type=int, default=100)
    p.add_argument("--finetune-batch-size", type=int, default=16)
    p.add_argument("--finetune-lr", type=float, default=5e-5)
    p.add_argument("--finetune-max-length", type=int, default=128, help="tokens per (pair) example")
    p.add_argument("--eval-limit", type=int, default=None, help="first N dev rows per task (default: all)")
    p.add_argument("--keep-weights", action="store_true", help="keep the pre-trained encoders when done")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    args.tasks = [t for t in TASKS if t in args.tasks]
    return args


def extra_options(args: argparse.Namespace) -> str:
    """The size options of this call that differ from the defaults, as command-line text."""
    defaults = parse_args([])
    parts = []
    for action in build_parser()._actions:
        name = action.dest
        if not action.option_strings or name in ("help", "data_root", "budget_minutes", "report_only"):
            continue
        value, default = getattr(args, name), getattr(defaults, name)
        if value == default:
            continue
        flag = action.option_strings[0]
        if isinstance(value, bool):
            parts.append(flag)
        elif isinstance(value, list):
            parts.append(f"{flag} {' '.join(str(v) for v in value)}")
        else:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def finetune_seeds(args: argparse.Namespace) -> list[int]:
    return list(range(1, args.seeds + 1))


def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """The pre-trainings first, then the fine-tunings seed by seed (so a partial sitting leaves whole pairs)."""
    runs = [(f"pretrain/{variant}", PRETRAIN_SEED) for variant in VARIANTS]
    for seed in finetune_seeds(args):
        for task in args.tasks:
            runs += [(f"{variant}/{task}", seed) for variant in ORDER]
    return runs


def split_setting(setting: str) -> tuple[str, str]:
    """``"mask/sst2"`` → ("mask", "sst2"); ``"pretrain/mask"`` → ("pretrain", "mask")."""
    head, _, tail = setting.partition("/")
    return head, tail


# ------------------------------------------------------------------------------------------- overrides


def common_overrides() -> list[str]:
    return ["train.keep_last=1", "train.overwrite=true", "train.progress_bar=false", "train.report_to=none"]


def pretrain_overrides(args: argparse.Namespace, variant: str, output_dir: Path | str) -> list[str]:
    """The ``--set`` list of one variant's pre-training (recipe capt-continued, no fine-tuning stage)."""
    steps = args.pretrain_steps
    sets = [
        f"output_dir={output_dir}",
        f"seed={PRETRAIN_SEED}",
        f"train.max_steps={steps}",
        f"train.batch_size={args.pretrain_batch_size}",
        f"data.max_length={args.pretrain_max_length}",
        f"train.eval_every={steps}",
        f"train.save_every={steps}",
        "train.eval_at_start=true",
        f"train.log_every={max(1, min(25, steps // 10))}",
        *common_overrides(),
        "method_args.finetune_task=null",
        *VARIANTS[variant],
    ]
    if variant == "mask-fixed":
        sets.append(f"method_args.fixed_temperature={args.fixed_temperature}")
    if args.sts_limit:
        sets.append(f"eval.limit={args.sts_limit}")
    return sets


def finetune_overrides(
    args: argparse.Namespace, task: str, seed: int, model: str, output_dir: Path | str
) -> list[str]:
    """The ``--set`` list whose ``finetune_*`` keys (contrastext.runs.capt.finetune_config) define the
    fine-tuning of ``model`` on ``task`` with seed ``seed``; ``data.few_shot`` is added to the stage after."""
    sets = [
        f"model={model}",
        f"output_dir={output_dir}",
        f"seed={seed}",
        f"data.max_length={args.finetune_max_length}",
        *common_overrides(),
        f"method_args.finetune_task={task}",
        "method_args.finetune_seeds=1",
        f"method_args.finetune_steps={args.finetune_steps}",
        f"method_args.finetune_lr={args.finetune_lr}",
        f"method_args.finetune_batch_size={args.finetune_batch_size}",
    ]
    if args.eval_limit:
        sets.append(f"method_args.finetune_eval_limit={args.eval_limit}")
    return sets


def sizes(args: argparse.Namespace, kind: str) -> dict:
    """The sizes a record depends on (checked against older records of the same results file)."""
    if kind == "pretrain":
        return {
            "pretrain_steps": args.pretrain_steps,
            "pretrain_batch_size": args.pretrain_batch_size,
            "pretrain_max_length": args.pretrain_max_length,
            "fixed_temperature": args.fixed_temperature,
        }
    return {
        **sizes(args, "pretrain"),
        "train_rows": args.train_rows,
        "finetune_steps": args.finetune_steps,
        "finetune_batch_size": args.finetune_batch_size,
        "finetune_lr": args.finetune_lr,
        "finetune_max_length": args.finetune_max_length,
        "eval_limit": args.eval_limit,
    }


def check_sizes(store: harness.RecordStore, args: argparse.Namespace) -> None:
    """Refuse to mix records made at other sizes into this results file."""
    for record in store.records:
        kind = "pretrain" if record["setting"].startswith("pretrain/") else "finetune"
        old = record.get("config", {}).get("sizes")
        if old is not None and old != sizes(args, kind):
            raise ValueError(
                f"{store.path}: record {record['setting']} seed {record['seed']} was made with sizes {old}, "
                f"this call asks for {sizes(args, kind)}; use the same options or another --results folder"
            )


# ------------------------------------------------------------------------------------------- runs


def runs_root(args: argparse.Namespace) -> Path:
    return Path(args.runs) / NAME


def weights_dir(args: argparse.Namespace, variant: str) -> Path:
    return runs_root(args) / "pretrained" / variant


def cached_pretrain(args: argparse.Namespace, variant: str) -> dict | None:
    """The stored summary of a variant's pre-trained encoder in the runs folder, when it is there and was
    made with this call's overrides (else None)."""
    folder = weights_dir(args, variant)
    summary = folder / "pretrain.json"
    if not summary.is_file() or not (folder / "encoder").is_dir():
        return None
    stored = json.loads(summary.read_text(encoding="utf-8"))
    if stored.get("sizes") != sizes(args, "pretrain") or stored.get("variant_overrides") != VARIANTS[variant]:
        return None
    return stored


def last_losses(log_path: Path, count: int = 3) -> dict[str, float | None]:
    """Mean of the last ``count`` logged values of loss/mlm, loss/capt and grad_norm."""
    from contrastext import read_log

    records = [r for r in read_log(log_path) if "loss" in r]
    out: dict[str, float | None] = {}
    for key, name in (("loss/mlm", "loss_mlm"), ("loss/capt", "loss_capt"), ("grad_norm", "grad_norm")):
        values = [float(r[key]) for r in records[-count:] if r.get(key) is not None]
        out[name] = statistics.fmean(values) if values and all(math.isfinite(v) for v in values) else None
    return out


def pretrain(args: argparse.Namespace, variant: str) -> dict:
    """Pre-train one variant (recipe capt-continued through run_recipe), keep only its encoder in
    ``<runs>/capt/pretrained/<variant>/encoder``; returns the stored summary (metrics + overrides)."""
    from contrastext import load_config, recipe_path, run_recipe

    output_dir = runs_root(args) / f"pretrain-{variant}"
    overrides = pretrain_overrides(args, variant, output_dir)
    config = load_config(recipe_path(RECIPE), overrides)
    summary = run_recipe(config, data_root=Path(args.data_root))
    stage = summary["pretrain"]
    final = Path(stage["final_model_dir"])
    if not final.is_dir():
        raise RuntimeError(f"pre-training {variant}: no final encoder in {final}")
    metrics = {
        "stsb_dev_spearman_start": _float(stage.get("start_metrics", {}).get("stsb_dev_spearman")),
        "stsb_dev_spearman": _float(stage["metrics"].get("stsb_dev_spearman")),
        "steps": float(stage["last_step"]),
        **last_losses(Path(stage["log_path"])),
    }
    folder = weights_dir(args, variant)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.move(str(final), str(folder / "encoder"))
    stored = {
        "variant": variant,
        "recipe": RECIPE,
        "overrides": overrides,
        "variant_overrides": VARIANTS[variant],
        "sizes": sizes(args, "pretrain"),
        "metrics": metrics,
    }
    (folder / "pretrain.json").write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")  # written last
    shutil.rmtree(output_dir, ignore_errors=True)  # checkpoints with the optimiser state: not needed again
    return stored


def run_pretrain(args: argparse.Namespace, variant: str) -> tuple[dict, dict]:
    """The ``pretrain/<variant>`` record: reuse the cached encoder when it is there, else pre-train."""
    stored = cached_pretrain(args, variant)
    reused = stored is not None
    if stored is None:
        stored = pretrain(args, variant)
    config = {
        "recipe": RECIPE,
        "overrides": stored["overrides"],
        "sizes": stored["sizes"],
        "weights": str(weights_dir(args, variant) / "encoder"),
        "reused_cached_weights": reused,
    }
    return config, dict(stored["metrics"])


def finetune(args: argparse.Namespace, variant: str, task: str, seed: int) -> tuple[dict, dict]:
    """One ``<variant>/<task>`` fine-tuning with seed ``seed``: the capt run module's fine-tuning stage
    (``finetune_config``: its warmup, head, evaluation at the end) on a seeded draw of ``--train-rows`` rows."""
    from contrastext import get_recipe, load_config, recipe_path, set_seed
    from contrastext.methods.classification import FineTuneMethod
    from contrastext.runs.capt import capt_encoder, finetune_config
    from contrastext.runs.classification import ClassificationArgs, head_evaluator
    from contrastext.runs.data import load_classification_data
    from contrastext.runs.registry import parse_method_args
    from contrastext.runs.stages import MethodBundle, run_training, stage_config

    pretrained_again = False
    if variant == REFERENCE:
        model = "bundled:all-MiniLM-L6-v2"
    else:
        if cached_pretrain(args, variant) is None:
            pretrain(args, variant)  # the record exists but its weights were deleted or made at other sizes
            pretrained_again = True
        model = str(weights_dir(args, variant) / "encoder")
    output_dir = runs_root(args) / "finetune" / f"{variant}-{task}-seed{seed}"
    overrides = finetune_overrides(args, task, seed, model, output_dir)
    config = load_config(recipe_path(RECIPE), overrides)
    method_args = parse_method_args(get_recipe(config.method), config)
    stage = stage_config(finetune_config(config, method_args, seed), data={"few_shot": args.train_rows})
    encoder = capt_encoder(config, method_args)
    data = load_classification_data(
        stage, ClassificationArgs(pooling=encoder.pooling), Path(args.data_root), seed=seed,
        few_shot_sampling="label_distribution",
    )
    set_seed(stage.train_seed)  # the fresh head's initialisation, as contrastext.runs.capt.finetune
    method = FineTuneMethod(encoder, data.task)
    description = dict(data.description)
    bundle = MethodBundle(method, list(data.train), head_evaluator(stage, data), final_report=lambda _m: description)
    summary = run_training(stage, bundle)
    shutil.rmtree(output_dir, ignore_errors=True)
    found = summary["metrics"]
    metrics = {
        name: _float(found.get(f"{task}_dev_{name}")) for name in ("accuracy", "f1", "mcc")
    }
    if metrics[METRIC] is None:
        raise RuntimeError(f"{variant}/{task} seed {seed}: no {task}_dev_{METRIC} in {sorted(found)}")
    metrics.update(n_train=float(description["n_train"]), n_eval=float(description["n_eval"]))
    config_record = {
        "recipe": RECIPE,
        "overrides": overrides,
        "stage_data": {"few_shot": args.train_rows, "few_shot_sampling": "label_distribution", "draw_seed": seed},
        "pretrain_overrides": None if variant == REFERENCE else pretrain_overrides(args, variant, "<runs>"),
        "sizes": sizes(args, "finetune"),
        "train_label_counts": description.get("train_label_counts"),
        "pretrained_again": pretrained_again,
    }
    return config_record, metrics


def run_one(args: argparse.Namespace):
    def run(setting: str, seed: int) -> tuple[dict, dict]:
        head, tail = split_setting(setting)
        if head == "pretrain":
            return run_pretrain(args, tail)
        return finetune(args, head, tail, seed)

    return run


def reference_seconds(args: argparse.Namespace, setting: str) -> float:
    """Seconds a run takes on 2 quiet cores by the cost model (``experiments/cost.py``)."""
    head, tail = split_setting(setting)
    if head == "pretrain":
        passes = (3 if tail == "shuffle" else 2) + 0.15  # encoder passes + the MLM head
        train = cost.train_seconds(args.pretrain_steps * args.pretrain_batch_size * passes, cost.tokens("wiki1m"))
        pairs = min(args.sts_limit or STSB_DEV_PAIRS, STSB_DEV_PAIRS)
        return train + cost.encode_seconds(2 * 2 * pairs) + cost.LOAD_S + 2 * cost.SAVE_S  # STS-B before, after
    train = cost.train_seconds(args.finetune_steps * args.finetune_batch_size, cost.tokens(tail))
    return train + cost.dev_seconds(tail, args.eval_limit) + cost.LOAD_S + cost.SAVE_S


def sitting_reference(args: argparse.Namespace):
    """``reference(setting)`` for this sitting's budget: a cached pre-training costs nothing (0 s: it is reused),
    and a fine-tuning whose variant is not cached pre-trains it first."""

    def reference(setting: str) -> float:
        head, tail = split_setting(setting)
        if head == "pretrain":
            return 0.0 if cached_pretrain(args, tail) is not None else reference_seconds(args, setting)
        extra = 0.0
        if head in VARIANTS and cached_pretrain(args, head) is None:
            extra = reference_seconds(args, f"pretrain/{head}")
        return reference_seconds(args, setting) + extra

    return reference


def clean_weights(store: harness.RecordStore, args: argparse.Namespace) -> None:
    """Delete a variant's pre-trained encoder once all its planned fine-tunings are recorded."""
    if args.keep_weights:
        return
    for variant in VARIANTS:
        needed = [(f"{variant}/{task}", seed) for seed in finetune_seeds(args) for task in args.tasks]
        if all(store.has(setting, seed) for setting, seed in needed):
            shutil.rmtree(weights_dir(args, variant), ignore_errors=True)


# ------------------------------------------------------------------------------------------- reading


def _float(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def task_values(store: harness.RecordStore, setting: str, key: str) -> dict[int, float]:
    """``seed -> value``; ``<variant>/avg`` is the mean over the tasks of a seed that has all of them."""
    variant, task = split_setting(setting)
    if task != "avg":
        return store.values(setting, key)
    per_task = [store.values(f"{variant}/{t}", key) for t in TASKS]
    present = [values for values in per_task if values]
    if len(present) < len(per_task):
        return {}
    seeds = set.intersection(*(set(values) for values in present))
    return {seed: statistics.fmean(values[seed] for values in present) for seed in sorted(seeds)}


def comparison(
    store: harness.RecordStore, treatment: str, baseline: str, task: str, cache: dict | None = None
) -> harness.Comparison:
    """``treatment`` vs ``baseline`` on ``task`` (or ``avg``), paired by fine-tuning seed; ``cache`` (one
    report's dict) avoids bootstrapping the same comparison twice."""
    key = (treatment, baseline, task)
    if cache is not None and key in cache:
        return cache[key]
    result = harness.compare(
        store, f"{treatment}/{task}", f"{baseline}/{task}", METRIC, direction=1,
        values=lambda setting, name: task_values(store, setting, name),
    )
    if cache is not None:
        cache[key] = result
    return result


def verdict_line(c: harness.Comparison, title: str, claim: str, where: str, weak: bool) -> str:
    """``**Verdict:** …`` from one comparison; ``weak`` (a "≥" claim) adds whether the interval contradicts it."""
    if len(c.seeds) < 2:
        return f"**Verdict:** {title}, {claim} ({where}): not enough seeds ({len(c.seeds)} paired)."
    text = c.text(scale=1.0, digits=2)
    if weak:
        if c.reproduced:
            note = "schedule better"
        elif c.high < 0:
            note = "the interval lies below 0: contradicts ≥"
        else:
            note = "the interval includes 0: consistent with ≥ (no difference) but does not show the claimed superiority"
        text += f" ({note})"
    elif opposite(c):
        text += " (the interval lies below 0: the baseline is better here, the opposite of the claim)"
    return f"**Verdict:** {title}, {claim} ({where}): {text}."


def opposite(c: harness.Comparison) -> bool:
    """Whether the interval excludes 0 against the paper's direction (treatment worse than the baseline)."""
    return len(c.seeds) >= 2 and (c.high < 0 if c.direction > 0 else c.low > 0)


def planned_count(args: argparse.Namespace) -> int:
    return len(plan(args))


# ------------------------------------------------------------------------------------------- report


def results_table(store: harness.RecordStore) -> str:
    headers = ["setting", "SST-2 acc", "MRPC acc", "MRPC F1", "RTE acc", "mean of 3 acc",
               "STS-B dev ρ after pre-training", "paper analogue (Table 2 dev: SST-2 / MRPC / RTE)"]
    rows = []
    for variant in ORDER:
        cells = [f"{variant}: {LABELS[variant]}"]
        for task, key in (("sst2", METRIC), ("mrpc", METRIC), ("mrpc", "f1"), ("rte", METRIC)):
            cells.append(harness.fmt_mean_std(list(store.values(f"{variant}/{task}", key).values())))
        cells.append(harness.fmt_mean_std(list(task_values(store, f"{variant}/avg", METRIC).values())))
        if variant == REFERENCE:
            starts = [r["metrics"].get("stsb_dev_spearman_start") for r in store.records
                      if r["setting"].startswith("pretrain/") and r["metrics"].get("stsb_dev_spearman_start") is not None]
            cells.append(f"{starts[0]:.2f} (before)" if starts else "–")
        else:
            record = store.get(f"pretrain/{variant}", PRETRAIN_SEED)
            value = record["metrics"].get("stsb_dev_spearman") if record else None
            cells.append(f"{value:.2f}" if value is not None else "–")
        cells.append(PAPER_ANALOGUE[variant])
        rows.append(cells)
    rows.append(["majority class (whole dev set)", f"{MAJORITY['sst2']:.2f}", f"{MAJORITY['mrpc']:.2f}",
                 f"{MAJORITY['mrpc_f1']:.2f}", f"{MAJORITY['rte']:.2f}",
                 f"{statistics.fmean(MAJORITY[t] for t in TASKS):.2f}", "", ""])
    return harness.markdown_table(headers, rows)


def pretrain_table(store: harness.RecordStore) -> str:
    headers = ["variant", "steps", "loss/mlm (last logs)", "loss/capt (last logs)", "grad norm before clipping",
               "STS-B dev ρ before → after", "wall"]
    rows = []
    for variant in VARIANTS:
        record = store.get(f"pretrain/{variant}", PRETRAIN_SEED)
        if record is None:
            rows.append([variant, "–", "–", "–", "–", "–", "–"])
            continue
        m = record["metrics"]

        def f(value, digits=2):
            return "–" if value is None else f"{value:.{digits}f}"

        rows.append([
            variant, f(m.get("steps"), 0), f(m.get("loss_mlm")), f(m.get("loss_capt")), f(m.get("grad_norm"), 1),
            f"{f(m.get('stsb_dev_spearman_start'))} → {f(m.get('stsb_dev_spearman'))}",
            f"{record['wall_s'] / 60:.1f} min" + (" (cached)" if record["config"].get("reused_cached_weights") else ""),
        ])
    return harness.markdown_table(headers, rows)


def paper_table() -> str:
    headers = ["Table 2 (large, 24 layers)", "SST-2", "MRPC", "RTE", "Avg (8 GLUE tasks)"]
    rows = []
    for split, title in (("dev", "dev, averaged over 5 seeds"), ("test", "test, leaderboard")):
        for model, numbers in PAPER_TABLE2[split].items():
            rows.append([f"{model} ({title})", numbers["sst2"], numbers["mrpc"], numbers["rte"], numbers["avg8"]])
    return harness.markdown_table(headers, rows)


def comparison_table(store: harness.RecordStore, tasks: list[str], cache: dict | None = None) -> str:
    headers = ["claim", "task", "treatment", "baseline", "n", "Δ (points)", "95 % CI", "verdict"]
    rows = []
    for treatment, baseline, claim, _where in COMPARISONS:
        for task in [*tasks, "avg"]:
            c = comparison(store, treatment, baseline, task, cache)
            if len(c.seeds) < 2:
                rows.append([claim, task, treatment, baseline, len(c.seeds), "–", "–", "not enough seeds"])
                continue
            rows.append([claim, task, treatment, baseline, len(c.seeds), f"{c.mean_difference:+.2f}",
                         f"[{c.low:+.2f}, {c.high:+.2f}]", c.verdict])
    return harness.markdown_table(headers, rows)


def report(store: harness.RecordStore, args: argparse.Namespace) -> str:
    tasks = list(args.tasks)
    cache: dict = {}
    lines = [
        "## CAPT: continued pre-training of MiniLM with MLM vs MLM + CAPT, then SST-2 / MRPC / RTE",
        "",
        "Luo et al., \"Rethinking Denoised Auto-Encoding in Language Pre-Training\" (EMNLP 2021; arXiv 2010.06351 "
        "\"CAPT: Contrastive Pre-Training for Learning Denoised Sequence Representations\").",
        "",
        "**The claims, quoted.**",
        "",
        f"- Abstract: \"{CLAIMS['abstract']}\"",
        f"- §3.3 (Table 2): \"{CLAIMS['3.3']}\"",
        f"- §5.2 (Figure 3 right, corruption): \"{CLAIMS['5.2']}\"",
        f"- §5.1 (Figure 3 left, temperature): \"{CLAIMS['5.1']}\"",
        "",
        "**The paper's numbers** (Table 2; GLUE metric is accuracy for SST-2, MRPC and RTE, §3.2 / Table 5). "
        "The ablations (masking vs shuffling, schedule vs constant τ) are plotted in Figure 3 of a small model "
        "(CAPT-Small) whose values are not given in the text, so there is no number of theirs to set beside ours.",
        "",
        paper_table(),
        "**Our protocol and sizes vs the paper's.** The paper pre-trains from scratch (CAPT-Small: 6 layers, "
        "256 wide, batch 2k × 200k steps; CAPT-Large: RoBERTa-large settings, batch 8k × 500k steps on "
        "BookCorpus + Wikipedia and more) and fine-tunes on the full GLUE training sets with RoBERTa's "
        "hyper-parameters (not stated), reporting the dev median/mean of 5 fine-tuning seeds. Its "
        "baseline in Table 2 is RoBERTa (MLM only, trained by other authors). Here, all-MiniLM-L6-v2 (22M "
        "parameters, 6 × 384) is *further* pre-trained (recipe `capt-continued`: Eq. 4 sum, Eq. 6 schedule, "
        f"queue 8192, A = 384 → 1536 → 384, mean pooling, lr 3e-5, AdamW β (0.9, 0.98)) for "
        f"{args.pretrain_steps} steps × {args.pretrain_batch_size} wiki1m sentences at ≤ "
        f"{args.pretrain_max_length} tokens, once per variant with the same pre-training seed "
        f"({PRETRAIN_SEED}: same sentences, same masks): `mlm` = `method_args.capt_weight=0` (the CAPT loss is "
        "computed but weighs 0: zero gradient), `mask` = `corruption=token_mask`, `shuffle` = "
        "`corruption=shuffle` (window 3; the MLM reads a separately masked copy, the paper does not say what "
        f"its MLM reads there), `mask-fixed` = `temperature=fixed`, τ = {args.fixed_temperature:g} (the paper's "
        "constant is \"manually tuned\" and not given; this value is our library's default, "
        "docs/methods/capt.md). `none` is all-MiniLM-L6-v2 fine-tuned without continued pre-training. Each "
        f"encoder is fine-tuned (fresh linear head on the mean-pooled vector, the `capt` run module's "
        f"fine-tuning stage: 10 % warmup, linear decay) for {args.finetune_steps} steps × "
        f"{args.finetune_batch_size} at lr {args.finetune_lr:g}, ≤ {args.finetune_max_length} tokens per pair, "
        f"on a draw of {args.train_rows} training rows (label distribution kept) made with the fine-tuning "
        f"seed, seeds 1–{args.seeds}; scored on the "
        + ("whole GLUE dev set" if not args.eval_limit else f"first {args.eval_limit} GLUE dev rows")
        + " of each task (SST-2 872, MRPC 408, RTE 277 rows). Our MLM head is freshly initialised "
        "(MiniLM ships none), so early MLM gradients come through a random head. With Eq. 4's *sum* over the "
        "batch the CAPT part dominates the gradient (see the grad-norm column below) and the recipe clips the "
        "whole gradient at norm 1.0 (the paper gives no clipping), so in the CAPT variants each update carries "
        "much less MLM signal than in `mlm`. A check of `none` seed 1 at the script's default sizes (not a "
        "recorded run) gave SST-2 78.4, MRPC 70.8 and RTE 50.2 (RTE 52.7 at lr 1e-4): at that scale RTE stays at the "
        "majority-class rate and MRPC barely above it (last row of the table), so differences there are "
        "mostly noise; SST-2 is the task where the fine-tuning learns.",
        "",
        "*all-MiniLM-L6-v2 is already sentence-tuned* (contrastive training on ~1B sentence pairs with mean "
        "pooling): the sentence-level, noise-robust representation CAPT is meant to add is largely there "
        "before we start, so CAPT's expected gain over MLM here is mostly *protecting* that representation "
        "from continued MLM, not creating it; the STS-B column shows what each pre-training kept. A few "
        "hundred steps of continued pre-training on 10k sentences is also a tiny fraction of the paper's "
        "pre-training, so small effects are expected either way.",
        "",
        "*Pairing and what the interval measures.* Variants are paired by fine-tuning seed (same training "
        "draw, head initialisation and data order). Every fine-tuning of a variant starts from the *same* "
        "pre-trained weights (one pre-training per variant), so the seeds measure fine-tuning noise only: "
        "an interval that excludes 0 says these two pre-trained models differ after fine-tuning, not that "
        "the pre-training method wins across pre-training runs. \"mean of 3\" is the mean of the three dev "
        "accuracies per seed (our stand-in for the GLUE average). The schedule ≥ fixed claim is tested with "
        "the same rule as the others (the paper says \"consistent superiority\"): reproduced only if the "
        "interval lies above 0; an interval containing 0 is consistent with \"≥\" but does not show it; one "
        "below 0 contradicts it.",
        "",
        "**Our results** (dev scores ×100, mean ± std (n seeds)):",
        "",
        results_table(store),
        "Pre-training runs (one per variant):",
        "",
        pretrain_table(store),
        "Paired comparisons (fine-tuning seeds; Δ = treatment − baseline in accuracy points, 95 % bootstrap "
        "interval of the mean paired difference):",
        "",
        comparison_table(store, tasks, cache),
    ]
    for treatment, baseline, claim, where in COMPARISONS:
        for task in [*tasks, "avg"]:
            title = "mean of the 3 tasks" if task == "avg" else TASK_TITLES[task]
            c = comparison(store, treatment, baseline, task, cache)
            lines.append(verdict_line(c, title, claim, where, weak=(baseline == "mask-fixed")))
            lines.append("")
    reference = comparison(store, "mask", REFERENCE, "avg")
    if len(reference.seeds) >= 2:
        lines += [
            "For reading (no claim of the paper): continued pre-training with CAPT (masking) vs no continued "
            f"pre-training, mean of 3 tasks: Δ = {reference.mean_difference:+.2f}, 95 % CI "
            f"[{reference.low:+.2f}, {reference.high:+.2f}] (n = {len(reference.seeds)}).",
            "",
        ]
    done, total = len([r for r in store.records if (r["setting"], r["seed"]) in set(plan(args))]), planned_count(args)
    if done < total:
        lines += [f"*Partial: {done}/{total} planned runs recorded; run the command again to go on.*", ""]
    else:
        lines += [reading(store, cache), ""]
    lines += [
        f"![CAPT continued pre-training: dev accuracy per task and variant]({NAME}.png)",
        "",
        "Command:",
        "",
        f"    {harness.command(NAME, args, extra_options(args))}",
        "",
        f"(Estimated {cost.plan_minutes(reference_seconds, args, plan(args)):.0f} min on 2 quiet cores at these "
        f"sizes.{measured_time(store)})",
    ]
    return "\n".join(lines)


def measured_time(store: harness.RecordStore) -> str:
    """`` Measured: …`` run time of the recorded runs, split into pre-training and each task's fine-tunings."""
    if not store.records:
        return ""
    minutes: dict[str, float] = {}
    for record in store.records:
        head, tail = split_setting(record["setting"])
        key = "pre-training" if head == "pretrain" else f"{tail} fine-tuning"
        minutes[key] = minutes.get(key, 0.0) + record["wall_s"] / 60
    total = sum(minutes.values())
    parts = ", ".join(f"{key} {value:.1f}" for key, value in minutes.items())
    limit = harness.DEFAULT_BUDGET_MINUTES
    over = f", {total - limit:.0f} min past the issue's {limit:.0f}-min limit" if total > limit else ""
    return f" Measured: {total:.1f} min of run time ({parts}){over}."


def reading(store: harness.RecordStore, cache: dict) -> str:
    """What the finished comparisons say together, with the pre-training diagnostics beside them."""
    main = comparison(store, "mask", "mlm", "avg", cache)
    shuffle = comparison(store, "shuffle", "mlm", "avg", cache)
    pretrain = {v: (store.get(f"pretrain/{v}", PRETRAIN_SEED) or {}).get("metrics", {}) for v in VARIANTS}
    norms = {v: m.get("grad_norm") for v, m in pretrain.items()}
    sts = {v: m.get("stsb_dev_spearman") for v, m in pretrain.items()}
    against = [(name, c) for name, c in (("masking", main), ("shuffling", shuffle)) if opposite(c)]
    text = "**Reading.** "
    if against:
        text += (f"MLM only is ahead of MLM + CAPT ({' and '.join(name for name, _ in against)}) on the mean of "
                 f"the 3 tasks (Δ {' and '.join(f'{c.mean_difference:+.2f}' for _, c in against)} points): at "
                 "this scale the contrastive part costs accuracy instead of adding it. ")
    else:
        text += "Neither CAPT variant separates from MLM only on the mean of the 3 tasks. "
    if all(norms.get(v) for v in ("mlm", "mask")):
        text += (f"Two things we did not vary may explain it (untested): with Eq. 4's sum over the batch the "
                 f"gradient before clipping is {norms['mask'] / norms['mlm']:.0f}× larger with CAPT (masking) "
                 f"than with MLM only ({norms['mask']:.0f} vs {norms['mlm']:.1f}), so clipping at 1.0 leaves "
                 "each CAPT step little MLM signal; and MiniLM starts sentence-tuned, so there is little "
                 "sentence-level structure for CAPT to add in 300 steps. ")
    if all(sts.get(v) is not None for v in VARIANTS):
        text += ("What each pre-training kept of MiniLM's STS-B quality (Spearman after): "
                 + ", ".join(f"{v} {sts[v]:.1f}" for v in VARIANTS)
                 + f" (before: {pretrain['mlm'].get('stsb_dev_spearman_start', float('nan')):.1f}). ")
        glue = {v: statistics.fmean(task_values(store, f"{v}/avg", METRIC).values() or [float("nan")])
                for v in VARIANTS}
        same_order = sorted(VARIANTS, key=sts.get) == sorted(VARIANTS, key=glue.get)
        text += ("The variants rank the same by this and by the mean GLUE accuracy." if same_order else
                 "The variants do not rank the same by this and by the mean GLUE accuracy: keeping STS quality "
                 "is not what decides the fine-tuned scores here.")
    return text


def summary(store: harness.RecordStore, args: argparse.Namespace | None = None) -> dict:
    args = args or parse_args([])
    total = planned_count(args)
    planned = set(plan(args))
    done = len([r for r in store.records if (r["setting"], r["seed"]) in planned])
    main = comparison(store, "mask", "mlm", "avg")
    shuffle = comparison(store, "shuffle", "mlm", "avg")
    schedule = comparison(store, "mask", "mask-fixed", "avg")
    if done < total:
        verdict = f"partial: {done}/{total} runs"
    else:
        def said(c: harness.Comparison) -> str:
            return c.verdict + (" (the opposite holds: interval below 0)" if opposite(c) else "")

        verdict = (f"CAPT(mask) > MLM: {said(main)}; shuffle > MLM: {said(shuffle)}; "
                   f"schedule ≥ fixed τ: {said(schedule)}")

    def part(c: harness.Comparison, name: str) -> str:
        if len(c.seeds) < 2:
            return f"{name}: –"
        return f"{name} Δ {c.mean_difference:+.2f} [{c.low:+.2f}, {c.high:+.2f}]"

    means = []
    for variant in ORDER:
        values = list(task_values(store, f"{variant}/avg", METRIC).values())
        means.append(f"{variant} {statistics.fmean(values):.1f}" if values else f"{variant} –")
    numbers = ("mean dev acc (SST-2/MRPC/RTE) " + ", ".join(means) + "; " + "; ".join(
        [part(main, "mask−mlm"), part(shuffle, "shuffle−mlm"), part(schedule, "schedule−fixed")]))
    return {
        "paper": PAPER,
        "claim": "MLM + CAPT beats MLM alone on GLUE (Table 2, §5.2); the Eq. 6 τ schedule beats a fixed τ (§5.1)",
        "verdict": verdict,
        "numbers": numbers,
    }


def plot(store: harness.RecordStore, args: argparse.Namespace, path: Path) -> Path:
    plt = harness.pyplot()
    panels = [*args.tasks, "avg"]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.8), squeeze=False)
    colors = ["#999999", "#4C72B0", "#DD8452", "#55A868", "#C44E52"]
    for ax, task in zip(axes[0], panels, strict=True):
        for index, variant in enumerate(ORDER):
            values = task_values(store, f"{variant}/{task}", METRIC)
            if values:
                points = list(values.values())
                ax.bar(index, statistics.fmean(points), color=colors[index], alpha=0.55, width=0.7)
                offsets = [(k - (len(points) - 1) / 2) * 0.08 for k in range(len(points))]
                ax.scatter([index + o for o in offsets], points, color="black", s=10, zorder=3)
            else:
                ax.text(index, 0.5, "–", ha="center", transform=ax.get_xaxis_transform())
        ax.set_xticks(range(len(ORDER)))
        ax.set_xticklabels(ORDER, rotation=35, ha="right", fontsize=8)
        title = "mean of 3 tasks" if task == "avg" else TASK_TITLES[task]
        ax.set_title(f"{title} dev accuracy", fontsize=10)
        every = [v for variant in ORDER for v in task_values(store, f"{variant}/{task}", METRIC).values()]
        if every:
            low, high = min(every), max(every)
            pad = max(1.0, 0.15 * (high - low))
            ax.set_ylim(low - pad, high + pad)
            chance = statistics.fmean(MAJORITY[t] for t in TASKS) if task == "avg" else MAJORITY.get(task)
            if chance is not None and low - pad < chance < high + pad:  # drawn only where it is in view
                ax.axhline(chance, color="black", linestyle="--", linewidth=0.8, label="majority class")
                ax.legend(fontsize=7, loc="upper right")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("CAPT continued pre-training of all-MiniLM-L6-v2 (bars: mean; dots: fine-tuning seeds; "
                 "dashed: majority class, where in view)",
                 fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    store = harness.RecordStore(NAME, args.results)
    check_sizes(store, args)
    left = 0
    if not args.report_only:
        minutes = cost.plan_minutes(reference_seconds, args, plan(args))
        print(f"[{NAME}] plan: {len(plan(args))} runs, ≈ {minutes:.0f} min on quiet cores", flush=True)
        budget = harness.Budget(args.budget_minutes)
        left = harness.run_plan(store, plan(args), run_one(args), budget, sitting_reference(args))
        clean_weights(store, args)
    harness.write_report(store, report(store, args))
    plot(store, args, Path(args.results) / f"{NAME}.png")
    print(json.dumps(summary(store, args), indent=1, ensure_ascii=False))
    return left


if __name__ == "__main__":
    main()
