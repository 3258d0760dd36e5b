"""RECLAIM (ICLR 2021 submission): Table 1, the ANS ablations and the semi-supervised setting, on CPU-sized data.

"Towards robust and efficient contrastive textual representation learning" (paper text:
``../shared/papers/reclaim.txt``; method: ``docs/methods/reclaim.md``). Fine-tuning adds λ·(critic NCE with
active negative selection, ANS) to the task loss; the paper reports that it improves every GLUE dev score
(Table 1, K = 100), that top-K beats drawing 80 % of the bank at random (§5.4), that it helps with 1–50 % of the
labels (Table 2, K = 10), and that it costs +4.4 % time (47 vs 45 min per MNLI epoch) and +200 MB.

**Settings** (``<task>/<variant>``; every run is one ``run_recipe`` call, 3 epochs, final weights scored on
the task's whole dev split, the recipe's protocol: batch 32, lr 2e-5 linear, clip 1, λ 0.1, ρ 0.5,
``metric_for_best: null``):

- ``<task>/plain``: fine-tuning without ANS, the TRUE baseline: the ``scl`` recipe with ``method_args.lam=0``
  (cross-entropy only; its SupCon part, weight 0, is a 32 × 32 similarity, negligible) and every training key
  set to the reclaim recipe's values (``tests/experiments/test_reclaim_experiment.py`` checks the two configs
  agree on every train/data/eval key). The reclaim recipe at ``lam=0`` would train the same model (zero
  gradient through the critic) but still runs the critic and the searches, so it is no baseline for time.
- ``<task>/top100``: the ``reclaim`` recipe, ``negatives: topk``, K = 100 (Table 1);
- ``sst2/in_batch``, ``sst2/random``: the §5.4 ablations (``negatives: in_batch``; ``negatives: random`` with
  ``random_fraction`` 0.8, "the 80% Method");
- ``sst2/semi<p>/lam0`` and ``sst2/semi<p>/k10``: the semi-supervised setting (§5.1): ``labelled_fraction`` p
  of a pool (the first ``--semi-pool`` SST-2 training rows; the draw is seeded by the run's seed), RECLAIM with
  K = 10 vs the same recipe at λ = 0 (same draw, same initialisation, data order and dropout: the exact
  plain fine-tuning gradient; its step time includes the idle critic and is not used as a time baseline).

Table-1 and ablation training sets are seeded balanced draws (``data.few_shot`` = N per class: the reclaim run
draws per class, the plain run is told ``data.few_shot_sampling=per_class``: the same rows at the same seed). The
memory banks hold one row per training example, so the banks here have 1,500 (SST-2) or 600 rows, not 67,349:
K = 100 is 7 % (SST-2) or 17 % (MRPC, RTE) of the bank instead of 0.15 %, a different regime.

**Per-step time** is read from each run's ``train_log.jsonl`` (``train.log_every=1``: the trainer's
``samples_per_s`` of every single step, measured after the bank update and before any evaluation, log write or
checkpoint): step seconds = the step's batch size / its rate. ``step_ms`` is the median over the full batches (32 rows)
after the first step; ``train_s`` the sum over all steps. Peak memory is NOT measured per run: every run shares one process, whose ``ru_maxrss`` only grows;
``bench/reclaim_overhead.py`` measures it properly (one child process per variant).

**Default plan** (5 seeds; its reference cost on 2 quiet cores is ``experiments/cost.py``'s: ``--estimate``
prints it per setting; about half of it is the fixed cost of a run, not training):

| part | settings | rows | steps (3 epochs) |
|---|---|---|---|
| Table 1 | sst2/plain, sst2/top100 | 1,500 (750 / class) | 141 |
| Table 1 | mrpc/plain, mrpc/top100 | 600 (300 / class) | 57 |
| Table 1 | rte/plain, rte/top100 | 600 (300 / class) | 57 |
| ablations | sst2/in_batch, sst2/random | 1,500 | 141 |
| semi-supervised | sst2/semi{1,5,10}/{lam0,k10} | 200 / 1,000 / 2,000 of the first 20,000 | 21 / 96 / 189 |

Max length stays at run_glue's 128: training runs on the real tokens only (unpadded), so a
cut to 96 would save < 10 % on RTE (mean 67 tokens, 21 % of pairs above 96) and nothing on SST-2 / MRPC.
The paper: full GLUE training sets (SST-2 67,349 rows, 6,315 steps), BERT-base / RoBERTa-base, semi-supervised
fractions of the full sets (1 % of SST-2 = 673 rows; ``--semi-pool 0`` draws from all 67,349 rows, ≈ +35 min).

Example::

    python experiments/reclaim.py --data-root ../shared/data --budget-minutes 90
    python experiments/reclaim.py --report-only
"""

from __future__ import annotations

import argparse
import functools
import math
import re
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # harness.py sits beside this script
import cost  # noqa: E402
import harness  # noqa: E402

NAME = "reclaim"
PAPER = "RECLAIM (ICLR 2021 submission)"
TASKS = ("sst2", "mrpc", "rte")
REPORTED = {"sst2": "accuracy", "mrpc": "f1", "rte": "accuracy"}  # GLUE's figure (MRPC: F1, as the brief asks)
TASK_NAMES = {"sst2": "SST-2", "mrpc": "MRPC", "rte": "RTE"}
ABLATIONS = ("in_batch", "random")
SEEDS = (1, 2, 3, 4, 5)
PLAIN = "plain"
SEMI_BASE = "lam0"

# The paper's words (verbatim from ../shared/papers/reclaim.txt).
CLAIM_TABLE1 = (
    "We present comparisons on fully supervised tasks in Table 1 , with K = 100 for RECLAIM. According to this "
    "table, RECLAIM consistently improves the performance on all GLUE datasets."
)
CLAIM_SEMI = (
    "For the semi-supervised experiments, we randomly draw {1%, 5%, 10%, 20%, 30%, 50%} from each training "
    "dataset in GLUE, and results are provided in Table 2 . Note that in this case, we only use top-10 (K = 10) "
    "negative examples, since the training dataset size is largely reduced. It can be seen from Table 2 that our "
    "approach generally achieves better results than just fine-tuning BERT on a small dataset."
)
CLAIM_ABLATION = (
    "Besides testing different Ks with ANS, we also test an alternative approach, where we random sample 80% of "
    "features from the memory bank as negative samples instead of applying ANS. We denote this method simply as "
    "the 80% Method. Also, the in-batch method denotes that we only use negative samples within the batch. [...] "
    "For K = 100 and K = 300, comparable results are often observed [...] Both of them show better results than "
    "the 80% Method without ANS."
)
CLAIM_COST = (
    "Without any contrastive regularization, BERT takes approximately 45 minutes per epoch. For K = 100, RECLAIM "
    "needs 47 minutes per epoch. The 80% Method takes 81 minutes per epoch. The memory usage for BERT-base is "
    "around 7.5GB for a batchsize (per GPU) of TITAN X. K = 100 takes an additional 200MB, and the 80% Method "
    "takes full 12GB memory capacity."
)
PAPER_OVERHEAD = {"top": 47 / 45 - 1, "random": 81 / 45 - 1}  # +4.4 %, +80 % (MNLI, BERT-base, per epoch)


# ------------------------------------------------------------------------------------------------- plan


def pct(fraction: float) -> str:
    """0.01 -> '1', 0.005 -> '0.5' (the setting-name form of a labelled fraction)."""
    return f"{fraction * 100:g}"


def top_variant(args: argparse.Namespace) -> str:
    return f"top{args.k}"


def semi_variant(args: argparse.Namespace) -> str:
    return f"k{args.semi_k}"


def table1_settings(args: argparse.Namespace) -> list[str]:
    return [f"{task}/{variant}" for task in args.tasks for variant in (PLAIN, top_variant(args))]


def ablation_settings(args: argparse.Namespace) -> list[str]:
    return [f"{args.ablation_task}/{mode}" for mode in args.ablations]


def semi_settings(args: argparse.Namespace) -> list[str]:
    return [
        f"{args.semi_task}/semi{pct(p)}/{variant}"
        for p in args.semi_fractions
        for variant in (SEMI_BASE, semi_variant(args))
    ]


def settings(args: argparse.Namespace) -> list[str]:
    return table1_settings(args) + ablation_settings(args) + semi_settings(args)


def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """Seed-major: every setting of seed 1, then of seed 2, ... (a partial sitting stays paired)."""
    return [(setting, seed) for seed in args.seeds for setting in settings(args)]


def parse_setting(setting: str) -> tuple[str, str, float | None]:
    """``"sst2/top100"`` -> (``sst2``, ``top100``, None); ``"sst2/semi5/k10"`` -> (``sst2``, ``k10``, 0.05)."""
    parts = setting.split("/")
    if len(parts) == 3 and parts[1].startswith("semi"):
        return parts[0], parts[2], float(parts[1][4:]) / 100
    if len(parts) != 2:
        raise ValueError(f"unknown setting {setting!r}")
    return parts[0], parts[1], None


def per_class(args: argparse.Namespace, task: str) -> int:
    return {"sst2": args.sst2_per_class, "mrpc": args.mrpc_per_class, "rte": args.rte_per_class}[task]


def n_train(args: argparse.Namespace, setting: str) -> int:
    """Training rows of a setting (the bank size of a RECLAIM run)."""
    task, _, fraction = parse_setting(setting)
    if fraction is None:
        return 2 * per_class(args, task)
    pool = args.semi_pool or {"sst2": 67_349, "mrpc": 3_668, "rte": 2_490}[task]
    return max(1, round(fraction * pool))


def run_dir(args: argparse.Namespace, setting: str, seed: int) -> Path:
    return Path(args.runs) / NAME / f"{setting.replace('/', '-')}-s{seed}"


def common_overrides(args: argparse.Namespace, task: str, seed: int) -> list[str]:
    """The keys every run shares, set explicitly so the plain (scl) and reclaim runs train alike."""
    sets = [
        f"seed={seed}",
        f"train.epochs={args.epochs:g}",
        "train.max_steps=null",
        "train.batch_size=32",
        "train.lr=2e-5",
        "train.schedule=linear",
        "train.warmup_ratio=0",
        "train.weight_decay=0",
        "train.grad_clip=1.0",
        "train.drop_last=false",
        "train.eval_every=null",  # evaluated once, at the last step (final weights)
        "train.save_every=null",
        "train.log_every=1",  # one log record (with samples_per_s) per step: the per-step time
        "train.metric_for_best=null",
        "train.keep_last=1",
        "train.overwrite=true",
        "train.progress_bar=false",
        "train.report_to=none",
        f"data.task={task}",
        f"data.max_length={args.max_length}",
        f"eval.tasks=[{task}:dev]",
        "eval.batch_size=64",
        "method_args.pooling=cls",
        "method_args.head_dropout=0.1",
    ]
    if args.eval_limit:
        sets.append(f"eval.limit={args.eval_limit}")
    return sets


LINEAR_HEAD = "method_args.head=linear"
PER_CLASS_DRAW = "data.few_shot_sampling=per_class"  # data.few_shot = N of each class (balanced draws)


def overrides(args: argparse.Namespace, setting: str, seed: int) -> tuple[str, list[str]]:
    """``(recipe, --set list)`` of one run."""
    task, variant, fraction = parse_setting(setting)
    sets = [f"output_dir={run_dir(args, setting, seed)}", *common_overrides(args, task, seed)]
    if fraction is not None:
        if args.semi_pool:
            sets.append(f"data.limit={args.semi_pool}")
        lam = 0 if variant == SEMI_BASE else 0.1
        return "reclaim", [
            *sets,
            f"method_args.labelled_fraction={fraction:g}",
            f"method_args.k={args.semi_k}",
            "method_args.negatives=topk",
            f"method_args.lam={lam}",
        ]
    sets.append(f"data.few_shot={per_class(args, task)}")
    if variant == PLAIN:
        return "scl", [
            *sets,
            "method_args.lam=0",
            LINEAR_HEAD,  # the reclaim arm's head, and the recorded runs' (scl's default: dense_tanh)
            f"method_args.seeds=[{seed}]",
            "method_args.protocol=dev",
            PER_CLASS_DRAW,  # method_args.few_shot_sampling=per_class before issue 20
            "data.label_noise=0",
        ]
    negatives = "topk" if variant == top_variant(args) else variant
    if negatives not in ("topk", *ABLATIONS):
        raise ValueError(f"unknown variant {variant!r} in {setting!r}")
    sets += [f"method_args.negatives={negatives}", "method_args.lam=0.1", f"method_args.k={args.k}"]
    if negatives == "random":
        sets.append("method_args.random_fraction=0.8")
    return "reclaim", [*sets, PER_CLASS_DRAW]  # reclaim's own draw, written out: the same data section as PLAIN's


def load(recipe: str, sets: list[str]):
    from contrastext import load_config, recipe_path

    return load_config(recipe_path(recipe), sets)


# -------------------------------------------------------------------------------------------- estimate


def reference_seconds(args: argparse.Namespace, setting: str) -> float:
    """Seconds of one run on 2 quiet cores by the cost model (``experiments/cost.py``)."""
    task, variant, fraction = parse_setting(setting)
    n = n_train(args, setting)
    batch = 32
    steps = math.ceil(math.ceil(n / batch) * args.epochs)
    step = cost.STEP_S + cost.train_seconds(min(batch, n), cost.tokens(task, args.max_length))
    if variant.startswith("top"):
        pairs = 2 * batch * args.k
    elif fraction is not None:  # lam0 still runs the critic at K = semi_k
        pairs = 2 * batch * args.semi_k
    elif variant == "in_batch":
        pairs = 2 * batch * (batch - 1) / 4  # the u, v projections are shared
    elif variant == "random":
        pairs = 2 * batch * 0.8 * n * 0.3  # bank rows projected once, then B × M pairs
    else:
        pairs = 0
    evaluation = 2 * cost.dev_seconds(task, args.eval_limit)  # the last step's and run_training's
    fixed = cost.LOAD_S + cost.SAVE_S + cost.EXPORT_S
    return fixed + evaluation + steps * (step + pairs * cost.CRITIC_S_PER_PAIR)


# ------------------------------------------------------------------------------------------------ a run


def step_sizes(n: int, batch: int, steps: int) -> list[int]:
    """Examples in each step of a ``drop_last: false`` run over ``n`` rows (the epoch's last batch is smaller)."""
    per_epoch = max(1, math.ceil(n / batch))
    last = n - batch * (per_epoch - 1)
    return [last if (i + 1) % per_epoch == 0 else min(batch, n) for i in range(steps)]


def timing(log_path: Path, n: int, batch: int = 32) -> dict:
    """Per-step training time from ``train_log.jsonl`` written with ``log_every=1``."""
    from contrastext import read_log

    records = [r for r in read_log(log_path) if "samples_per_s" in r and "step" in r]
    records.sort(key=lambda r: r["step"])
    if not records:
        return {"steps": 0, "step_ms": None, "step_ms_mean": None, "train_s": None}
    steps = records[-1]["step"]
    contiguous = [r["step"] for r in records] == list(range(1, steps + 1))
    sizes = step_sizes(n, batch, steps) if contiguous else [min(batch, n)] * len(records)
    timed = [(size, size / r["samples_per_s"]) for size, r in zip(sizes, records, strict=False) if r["samples_per_s"] > 0]
    seconds = [t for _, t in timed]
    # The median over full batches, without the first step (it also starts the data loader).
    full = [t for size, t in timed[1:] if size == min(batch, n)] or seconds
    return {
        "steps": steps,
        "step_ms": 1000 * statistics.median(full),
        "step_ms_mean": 1000 * statistics.fmean(seconds),
        "train_s": sum(seconds),
    }


def loss_at_end(log_path: Path, key: str, share: float = 0.1) -> float | None:
    """Mean of a logged loss part over the last ``share`` of the steps (None when it was not logged)."""
    from contrastext import read_log

    values = [float(r[key]) for r in read_log(log_path) if key in r and r[key] is not None]
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return None
    tail = values[-max(1, round(share * len(values))):]
    return statistics.fmean(tail)


def _skipped_steps(log_path: Path) -> int:
    """Steps the trainer skipped for a non-finite loss (its running count ``skipped_nonfinite``)."""
    from contrastext import read_log

    return max((int(r.get("skipped_nonfinite", 0)) for r in read_log(log_path)), default=0)


def _finite(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def run_one(args: argparse.Namespace, setting: str, seed: int) -> tuple[dict, dict]:
    """Train one (setting, seed), read its dev metrics and per-step time, delete its folder."""
    from contrastext import run_recipe

    recipe, sets = overrides(args, setting, seed)
    config = load(recipe, sets)
    folder = run_dir(args, setting, seed)
    summary = run_recipe(config, data_root=Path(args.data_root))
    result = summary["runs"][str(seed)] if recipe == "scl" else summary
    task, variant, fraction = parse_setting(setting)
    scores = result["metrics"]
    report = result.get("report") or {}
    n = int(report.get("n_train", n_train(args, setting)))
    log_path = Path(result["log_path"])
    metrics = {
        "metric": _finite(scores[f"{task}_dev_{REPORTED[task]}"]),
        "accuracy": _finite(scores.get(f"{task}_dev_accuracy")),
        "f1": _finite(scores.get(f"{task}_dev_f1")),
        "mcc": _finite(scores.get(f"{task}_dev_mcc")),
        "n_train": n,
        "n_eval": report.get("n_eval"),
        **timing(log_path, n),
        "task_loss_end": _finite(loss_at_end(log_path, "loss/ce" if recipe == "scl" else "loss/task")),
        "ans_end": None if recipe == "scl" else _finite(loss_at_end(log_path, "loss/ans")),
    }
    if report.get("train_label_counts"):
        metrics["train_label_counts"] = report["train_label_counts"]
    skipped = _skipped_steps(log_path)
    if metrics["metric"] is None or skipped:
        raise RuntimeError(
            f"{setting} seed {seed}: dev {REPORTED[task]} {metrics['metric']}, {skipped} step(s) skipped for a "
            f"non-finite loss (see {log_path}); not recorded"
        )
    if not args.keep_runs:
        shutil.rmtree(folder, ignore_errors=True)
    record_config = {"recipe": recipe, "overrides": [s for s in sets if not s.startswith("output_dir=")]}
    record_config["output_dir"] = str(folder)
    return record_config, metrics


def _matches(store: harness.RecordStore, args: argparse.Namespace, setting: str, seed: int) -> bool:
    """Whether (setting, seed) is recorded with the overrides ``args`` give it (output_dir aside)."""
    record = store.get(setting, seed)
    if record is None:
        return False
    recipe, sets = overrides(args, setting, seed)
    wanted = [s for s in sets if not s.startswith("output_dir=")]
    recorded = harness.renamed_keys(record["config"].get("overrides") or [])
    if recipe == "reclaim" and PER_CLASS_DRAW not in recorded:  # recorded before issue 20: the recipe's default then
        wanted = [s for s in wanted if s != PER_CLASS_DRAW]
    if recipe == "scl" and LINEAR_HEAD not in recorded:  # recorded before scl's head option: linear was the only one
        wanted = [s for s in wanted if s != LINEAR_HEAD]
    return record["config"].get("recipe") == recipe and recorded == wanted


def check_compatible(store: harness.RecordStore, args: argparse.Namespace) -> None:
    """Records of the plan's settings must have been made with the same overrides (sizes, K, epochs, ...)."""
    for setting, seed in plan(args):
        record = store.get(setting, seed)
        if record is not None and not _matches(store, args, setting, seed):
            raise SystemExit(
                f"{store.path}: the record of {setting} seed {seed} was made with other options "
                f"({record['config'].get('overrides')}); run with the same options, or another --results"
            )


# --------------------------------------------------------------------------------------------- reading


def _values(store: harness.RecordStore, setting: str, key: str = "metric") -> list[float]:
    return list(store.values(setting, key).values())


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _ci_text(c: harness.Comparison, unit: str = " points") -> str:
    if len(c.seeds) < 2:
        return f"n = {len(c.seeds)}: not enough seeds"
    return f"Δ = {c.mean_difference:+.2f}{unit}, 95 % CI [{c.low:+.2f}, {c.high:+.2f}], n = {len(c.seeds)}"


def table1_comparisons(store: harness.RecordStore, args: argparse.Namespace) -> list[tuple[str, harness.Comparison]]:
    return [
        (task, harness.compare(store, f"{task}/{top_variant(args)}", f"{task}/{PLAIN}", "metric", +1))
        for task in args.tasks
    ]


def ablation_comparisons(store: harness.RecordStore, args: argparse.Namespace) -> list[tuple[str, harness.Comparison]]:
    task = args.ablation_task
    return [
        (mode, harness.compare(store, f"{task}/{top_variant(args)}", f"{task}/{mode}", "metric", +1))
        for mode in args.ablations
    ]


def semi_comparisons(store: harness.RecordStore, args: argparse.Namespace) -> list[tuple[float, harness.Comparison]]:
    task = args.semi_task
    return [
        (p, harness.compare(store, f"{task}/semi{pct(p)}/{semi_variant(args)}", f"{task}/semi{pct(p)}/{SEMI_BASE}",
                            "metric", +1))
        for p in args.semi_fractions
    ]


def overhead(store: harness.RecordStore, treatment: str, baseline: str) -> dict | None:
    """Per-step time of ``treatment`` over ``baseline`` (same seed): the relative overhead in % per seed."""
    t, b = store.values(treatment, "step_ms"), store.values(baseline, "step_ms")
    seeds = sorted(set(t) & set(b))
    if not seeds:
        return None
    ratios = [100 * (t[s] / b[s] - 1) for s in seeds]
    low, high = harness.bootstrap_interval(ratios)
    return {"seeds": seeds, "values": ratios, "mean": statistics.fmean(ratios), "low": low, "high": high}


def _overhead_text(result: dict | None) -> str:
    if result is None:
        return "–"
    mean, std = harness.mean_std(result["values"])
    ci = "" if math.isnan(result["low"]) else f", CI [{result['low']:+.1f}, {result['high']:+.1f}]"
    return f"{mean:+.1f} % ± {std:.1f} (n = {len(result['seeds'])}{ci})"


def _verdict_word(c: harness.Comparison) -> str:
    return c.verdict


# ------------------------------------------------------------------------------ the bench's overhead block

BENCHMARKS = harness.REPO / "BENCHMARKS.md"
BENCH_SCRIPT = "reclaim_overhead.py"


def _markdown_block_module():
    """``bench/markdown_block.py`` (the markers of each bench script's block), loaded from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_markdown_block", harness.REPO / "bench" / "markdown_block.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INTERLEAVED_SUFFIX = "(67k rows, interleaved)"  # the block of `--interleave`: time paired within each process


def bench_block(path: Path = BENCHMARKS, suffix: str = "") -> str | None:
    """The text between ``bench/reclaim_overhead.py``'s markers (``suffix`` appended) in ``path`` (None: no file
    or no block)."""
    begin, end = _markdown_block_module().markers(BENCH_SCRIPT, suffix)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if begin not in text or end not in text.split(begin, 1)[1]:
        return None
    return text.split(begin, 1)[1].split(end, 1)[0]


def block_rows(block: str) -> list[dict[str, str]]:
    """The rows of the block's table as {column header: cell}."""
    lines = [line.strip() for line in block.splitlines() if line.strip().startswith("|")]
    if len(lines) < 3:
        return []
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return [dict(zip(cells[0], row, strict=False)) for row in cells[2:]]


def _block_date(block: str) -> str:
    for line in block.splitlines():
        if line.startswith("- date:"):
            return line[len("- date:"):].split(";")[0].strip()
    return "undated"


def bench_overhead(path: Path = BENCHMARKS, suffix: str = "") -> dict:
    """What the block says about top-K with the kept IVF index: per bank size, the time ratio over the baseline
    and the extra peak MiB; ``status`` is ``ok``, ``missing`` (no block) or ``no top-K rows``."""
    block = bench_block(path, suffix)
    if block is None:
        return {"status": "missing", "path": str(path)}
    rows = []
    for row in block_rows(block):
        if row.get("negatives") == "top-K" and row.get("search", "").startswith("ivf"):
            try:
                ratio = float(row["time vs baseline"])
            except (KeyError, ValueError):
                continue
            rows.append({"bank_rows": row.get("bank rows", "?"), "time_pct": 100 * (ratio - 1),
                         "extra_mib": row.get("+ MiB", "?")})
    memory = [row.get("+ MiB", "?") for row in block_rows(block) if row.get("negatives") == "in_batch"]
    k = re.search(r"\bK = (\d+)", block)
    return {"status": "ok" if rows else "no top-K rows", "path": str(path), "date": _block_date(block),
            "k": k.group(1) if k else "?",
            "rows": rows, "in_batch_mib": memory}


def bench_overhead_text(result: dict) -> str:
    """One plain sentence of what BENCHMARKS.md's ``bench/reclaim_overhead.py`` block says (or that it is absent)."""
    where = f"BENCHMARKS.md's `bench/{BENCH_SCRIPT}` block"
    if result["status"] == "missing":
        return f"{where} is missing ({result['path']} has none): no full-size overhead has been measured"
    if result["status"] != "ok":
        return f"{where} ({result['date']}) holds no top-K row with the kept index to read"
    parts = "; ".join(f"{r['bank_rows']} bank rows: {r['time_pct']:+.1f} % time per step, {r['extra_mib']} MiB peak"
                      for r in result["rows"])
    memory = f" (in-batch negatives row: {' / '.join(result['in_batch_mib'])} MiB)" if result["in_batch_mib"] else ""
    paired = bench_overhead(Path(result["path"]), INTERLEAVED_SUFFIX)
    paired_text = ""
    if paired["status"] == "ok":
        paired_parts = "; ".join(f"{r['bank_rows']} bank rows: {r['time_pct']:+.1f} %" for r in paired["rows"])
        paired_text = (f"; paired in time within each process (`--interleave`, its block `{INTERLEAVED_SUFFIX}`, "
                       f"{paired['date']}), the figure to read for time: {paired_parts}")
    return (f"{where} ({result['date']}; one process per variant) measures top-K = {result['k']} with the kept IVF "
            f"index over its baseline step (no RECLAIM) at full bank sizes: {parts}{memory}{paired_text}")


# ---------------------------------------------------------------------------------------------- report


def paper_section() -> str:
    rows = [
        ("GLUE dev scores, Table 1 (BERT-base, RoBERTa-base), K = 100", "not in the supplied text (table lost)"),
        ("ablation, Table 5 (K ∈ {1, 10, 100, 300}, 80 % Method, in-batch)", "not in the supplied text"),
        ("semi-supervised, Table 2 (1–50 % of each training set, K = 10)", "not in the supplied text"),
        ("MNLI time per epoch: BERT / K = 100 / 80 % Method", "45 / 47 / 81 min (+4.4 % / +80 %)"),
        ("memory (TITAN X, BERT-base)", "≈ 7.5 GB; K = 100: + 200 MB; 80 % Method: the full 12 GB"),
        ("λ; K; K (semi-supervised)", "0.1; 100; 10"),
        ("batch; lr; epochs", "32; 2 × 10⁻⁵; 3 (appendix C)"),
    ]
    return (
        "### The paper's numbers\n\n"
        "The extracted paper text (`../shared/papers/reclaim.txt`) keeps the captions of Tables 1, 2 and 5 "
        "but none of their cells, so no per-task score of the paper can be quoted here; the numbers it does "
        "give:\n\n" + harness.markdown_table(["what", "paper"], rows)
    )


def protocol_section(args: argparse.Namespace) -> str:
    pool = f"the first {args.semi_pool:,} SST-2 training rows" if args.semi_pool else "the whole training set"
    fractions = ", ".join(f"{pct(p)} %" for p in args.semi_fractions) or "none"
    rows = [
        ("encoder", "BERT-base / RoBERTa-base (12 layers)", "all-MiniLM-L6-v2 (6 layers, 384 wide), [CLS] + linear head"),
        ("tasks", "all GLUE tasks", f"{', '.join(TASK_NAMES[t] for t in args.tasks)} (Table 1); "
         f"{TASK_NAMES[args.ablation_task]} (ablations, semi-supervised)"),
        ("training rows (Table 1)", "the full training sets (SST-2 67,349; MRPC 3,668; RTE 2,490)",
         f"seeded balanced draws: SST-2 {2 * args.sst2_per_class:,}, MRPC {2 * args.mrpc_per_class:,}, "
         f"RTE {2 * args.rte_per_class:,} ({args.sst2_per_class}/{args.mrpc_per_class}/{args.rte_per_class} per class)"),
        ("memory banks", "one row per training example (67,349 on SST-2)",
         f"the same rule: {min(2 * per_class(args, t) for t in args.tasks or TASKS):,}–"
         f"{max(2 * per_class(args, t) for t in args.tasks or TASKS):,} rows in Table 1, so K = {args.k} is "
         f"{100 * args.k / max(2 * per_class(args, t) for t in args.tasks or TASKS):.0f}–"
         f"{100 * args.k / min(2 * per_class(args, t) for t in args.tasks or TASKS):.0f} % of the bank, not 0.15 %"),
        ("semi-supervised", "{1, 5, 10, 20, 30, 50} % of each training set, K = 10",
         f"{fractions} of {pool} (seeded uniform draw), K = {args.semi_k}; "
         "baseline: the same recipe at λ = 0 (same draw, same initialisation and dropout)"),
        ("baseline (Table 1)", "plain fine-tuning", "plain fine-tuning: the scl recipe at λ = 0 with the reclaim "
         "recipe's training keys (same rows, same seed; its SupCon term has weight 0)"),
        ("epochs, batch, lr", "3, 32, 2e-5", f"{args.epochs:g}, 32, 2e-5 (linear decay, clip 1.0)"),
        ("max length", "not given (run_glue 128)", f"{args.max_length} (SST-2 ≤ 57 tokens; MRPC mean 53; RTE mean 67, "
         "21 % of RTE pairs longer than 96)"),
        ("reported", "dev, final weights", "dev (whole split), final weights (metric_for_best null); SST-2, RTE "
         "accuracy, MRPC F1 (×100)"),
        ("seeds", "not given", f"{len(args.seeds)} ({', '.join(map(str, args.seeds))}), paired by seed"),
    ]
    return (
        "### Protocol: ours vs the paper's\n\n" + harness.markdown_table(["", "paper", "ours"], rows) + "\n"
        "all-MiniLM-L6-v2 is already sentence-tuned (contrastively, on 1B pairs, with mean pooling): its "
        "representations are already \"distinguishable\", the property RECLAIM's critic adds, so the room "
        "for a contrastive regulariser is smaller than on BERT-base, and its [CLS] vector was not the trained "
        "sentence vector. With a few hundred to 2,000 training rows and 21–189 steps, the banks are refreshed "
        "only 3 times (once per epoch) and start as N(0, I) noise: in the first epoch the K \"hardest\" negatives are noise "
        "rows or rows seen once. Step times come from a shared 2-core machine (load averages in the JSON); "
        "the per-seed ratios are paired but the runs are not simultaneous.\n"
    )


def results_section(store: harness.RecordStore, args: argparse.Namespace) -> str:
    top = top_variant(args)
    rows = []
    for task, c in table1_comparisons(store, args):
        metric = "F1" if REPORTED[task] == "f1" else "accuracy"
        rows.append((
            f"{TASK_NAMES[task]} ({metric})",
            harness.fmt_mean_std(_values(store, f"{task}/{PLAIN}")),
            harness.fmt_mean_std(_values(store, f"{task}/{top}")),
            _ci_text(c),
            _verdict_word(c) if c.seeds else "–",
            "improves (value not in the text)",
        ))
    table1 = harness.markdown_table(
        ["task (metric)", "no ANS (plain)", f"ANS top-K = {args.k}", "top-K − plain", "verdict", "paper"], rows
    )
    task = args.ablation_task
    rows = []
    for setting, label in [(f"{task}/{PLAIN}", "no ANS (plain)"), (f"{task}/{top}", f"top-K = {args.k}"),
                           *[(f"{task}/{m}", "in-batch" if m == "in_batch" else "random 80 %") for m in args.ablations]]:
        rows.append((label, harness.fmt_mean_std(_values(store, setting)),
                     harness.fmt_mean_std(_values(store, setting, "ans_end")),
                     harness.fmt_mean_std(_values(store, setting, "step_ms"), digits=0)))
    ablation = harness.markdown_table(
        [f"{TASK_NAMES[task]} variant", "dev accuracy", "ans part (last 10 % of steps)", "ms per step (median)"], rows
    )
    ablation += (
        "\nThe text states the comparison with the 80 % Method only (\"Both of them show better results than the "
        "80% Method\"); that top-K also beats in-batch negatives is our reading of §5.4 (Table 5's cells are lost). "
        "The `ans` part is Eq. 6's sum over the negatives (½ Σ), so its size grows with their number (K = 100: "
        "≈ 101·log 2 at the start; the 80 % Method: (1 + 0.8·N)·log 2 ≈ 0.55 × bank rows).\n"
    )
    rows = []
    for p, c in semi_comparisons(store, args):
        base = f"{args.semi_task}/semi{pct(p)}/{SEMI_BASE}"
        rows.append((
            f"{pct(p)} %",
            f"{n_train(args, base):,}",
            harness.fmt_mean_std(_values(store, base)),
            harness.fmt_mean_std(_values(store, f"{args.semi_task}/semi{pct(p)}/{semi_variant(args)}")),
            _ci_text(c),
            _verdict_word(c) if c.seeds else "–",
        ))
    semi = harness.markdown_table(
        ["labelled", "rows", "fine-tuning (λ = 0)", f"RECLAIM K = {args.semi_k}", "RECLAIM − fine-tuning", "verdict"],
        rows,
    )
    rows = []
    for task_name in args.tasks:
        base = f"{task_name}/{PLAIN}"
        rows.append((f"{TASK_NAMES[task_name]} top-K = {args.k}",
                     harness.fmt_mean_std(_values(store, base, "step_ms"), digits=0),
                     harness.fmt_mean_std(_values(store, f"{task_name}/{top}", "step_ms"), digits=0),
                     _overhead_text(overhead(store, f"{task_name}/{top}", base)), "+4.4 % (MNLI, K = 100)"))
    for mode in args.ablations:
        base = f"{args.ablation_task}/{PLAIN}"
        paper = "+80 % (MNLI)" if mode == "random" else "not given"
        rows.append((f"{TASK_NAMES[args.ablation_task]} {'random 80 %' if mode == 'random' else 'in-batch'}",
                     harness.fmt_mean_std(_values(store, base, "step_ms"), digits=0),
                     harness.fmt_mean_std(_values(store, f"{args.ablation_task}/{mode}", "step_ms"), digits=0),
                     _overhead_text(overhead(store, f"{args.ablation_task}/{mode}", base)), paper))
    table = harness.markdown_table(["variant", "plain ms/step", "variant ms/step", "time overhead per step (paired)",
                                   "paper"], rows)
    return (
        "### Our results\n\n"
        "Mean ± std (n seeds) of the dev score ×100, final weights; Δ = mean paired difference with its 95 % "
        "bootstrap interval.\n\n**Table 1: with and without ANS**\n\n" + table1 +
        "\n**Ablation (§5.4): where the negatives come from**\n\n" + ablation +
        "\n**Semi-supervised setting (§5.1)**\n\n" + semi +
        "\n**Cost per optimisation step** (median full batch of 32 after the first step, from `train_log.jsonl`; "
        "the paper's figures are per epoch on MNLI with BERT-base on a GPU). Memory is not measured per run (all runs share "
        "one process, whose peak RSS only grows); `bench/reclaim_overhead.py` measures time and peak memory of "
        "each variant in its own process. " + bench_overhead_text(bench_overhead(_benchmarks(args))) + ". The paper: "
        "+4.4 % time and + 200 MB for K = 100 over 7.5 GB (MNLI, BERT-base, GPU). The runs below have 1,500- or "
        "600-row banks, so their overhead is of a much smaller bank than either.\n\n" + table
    )


def verdict_lines(store: harness.RecordStore, args: argparse.Namespace) -> str:
    lines = []
    for task, c in table1_comparisons(store, args):
        lines.append(f"**Verdict:** Table 1, {TASK_NAMES[task]}: {c.text()}.")
    for mode, c in ablation_comparisons(store, args):
        lines.append(f"**Verdict:** ablation, top-K vs {mode.replace('_', '-')}: {c.text()}.")
    for p, c in semi_comparisons(store, args):
        lines.append(f"**Verdict:** semi-supervised {pct(p)} %: {c.text()}.")
    overheads = [(t, overhead(store, f"{t}/{top_variant(args)}", f"{t}/{PLAIN}")) for t in args.tasks]
    overheads = [(t, c) for t, c in overheads if c]
    if overheads:
        parts = ", ".join(f"{TASK_NAMES[t]} {_overhead_text(c)}" for t, c in overheads)
        lines.append(f"Time per step, top-K = {args.k} over plain fine-tuning (banks of ≤ 1,500 rows): {parts}; "
                     f"{bench_overhead_text(bench_overhead(_benchmarks(args)))}; the paper: +4.4 % on MNLI "
                     "(per epoch, BERT-base, GPU).")
    return "\n\n".join(lines) + "\n"


def _benchmarks(args: argparse.Namespace) -> Path:
    return Path(getattr(args, "benchmarks", None) or BENCHMARKS)


def report(store: harness.RecordStore, args: argparse.Namespace) -> str:
    extra = ""
    defaults = build_parser().parse_args([])
    for option in ("seeds", "tasks", "ablations", "semi_fractions"):
        if getattr(args, option) != getattr(defaults, option):
            value = getattr(args, option)
            extra += f" --{option.replace('_', '-')} {' '.join(str(v) for v in value)}"
    for option in ("sst2_per_class", "mrpc_per_class", "rte_per_class", "semi_pool", "k", "semi_k", "epochs",
                   "max_length", "eval_limit", "ablation_task", "semi_task"):
        if getattr(args, option) != getattr(defaults, option):
            extra += f" --{option.replace('_', '-')} {getattr(args, option)}"
    done = sum(store.has(s, seed) for s, seed in plan(args))
    return (
        "## RECLAIM: with and without active negative selection (Table 1, ablations, semi-supervised)\n\n"
        "### The claims (verbatim)\n\n"
        f"> {CLAIM_TABLE1}\n\n— §5.1 (Table 1)\n\n"
        f"> {CLAIM_ABLATION}\n\n— §5.4 (Table 5)\n\n"
        f"> {CLAIM_SEMI}\n\n— §5.1 (Table 2)\n\n"
        f"> {CLAIM_COST}\n\n— §5.4 (computational efficiency)\n\n"
        + paper_section() + "\n" + protocol_section(args) + "\n"
        + f"{done} of the plan's {len(plan(args))} runs are recorded.\n\n"
        + results_section(store, args) + "\n" + verdict_lines(store, args) + "\n"
        + f"![RECLAIM: dev scores per variant, semi-supervised curve, step time]({NAME}.png)\n\n"
        + "### Command\n\n```bash\n" + harness.command(NAME, args, extra.strip()) + "\n```\n"
    )


def _bench_numbers(result: dict) -> str:
    """The summary's part of the bench block: top-K time per bank size, or that the block is missing."""
    if result["status"] == "missing":
        return "; bench overhead: no BENCHMARKS.md block"
    if result["status"] != "ok":
        return "; bench overhead: no top-K row"
    return "; bench top-K: " + ", ".join(f"{r['time_pct']:+.0f} % at {r['bank_rows']} rows" for r in result["rows"])


def summary(store: harness.RecordStore) -> dict:
    args = build_parser().parse_args([])
    planned = plan(args)
    done = sum(_matches(store, args, s, seed) for s, seed in planned)  # made with the default options
    table1 = table1_comparisons(store, args)
    ablation = ablation_comparisons(store, args)
    semi = semi_comparisons(store, args)

    def count(items) -> str:
        return f"{sum(c.reproduced for _, c in items)}/{len(items)}"

    if done < len(planned):
        verdict = f"partial: {done}/{len(planned)} runs"
    else:
        verdict = (
            f"Table 1 reproduced on {count(table1)} tasks, top-K > in-batch/random on {count(ablation)}, "
            f"semi-supervised on {count(semi)} fractions"
        )
        if sum(c.reproduced for _, c in table1 + ablation + semi) == 0:
            verdict = "not reproduced at this scale (" + verdict + ")"

    def delta(c: harness.Comparison) -> str:
        return "–" if not c.seeds else f"{c.mean_difference:+.2f}"

    step = overhead(store, f"sst2/{top_variant(args)}", f"sst2/{PLAIN}")
    numbers = (
        "top-K − plain: " + ", ".join(f"{TASK_NAMES[t]} {delta(c)}" for t, c in table1)
        + "; top-K − in-batch/random (SST-2): " + ", ".join(delta(c) for _, c in ablation)
        + "; semi 1/5/10 %: " + ", ".join(delta(c) for _, c in semi)
        + (f"; step time SST-2 {step['mean']:+.0f} % (1,500-row bank)" if step else "")
        + _bench_numbers(bench_overhead())
    )
    return {
        "paper": PAPER,
        "claim": "ANS (K = 100) improves every GLUE dev score over plain fine-tuning at +4.4 % time; top-K beats "
                 "80 % random; helps with 1–50 % of the labels (K = 10)",
        "verdict": verdict,
        "numbers": numbers,
    }


# ------------------------------------------------------------------------------------------------ plot


def plot(store: harness.RecordStore, args: argparse.Namespace, path: Path) -> Path:
    plt = harness.pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    top = top_variant(args)
    colours = {PLAIN: "#888888", top: "#1f77b4", "in_batch": "#2ca02c", "random": "#d62728"}
    for ax, task in zip(axes[0], TASKS, strict=True):
        if task not in args.tasks:
            ax.set_axis_off()
            continue
        variants = [PLAIN, top] + (list(args.ablations) if task == args.ablation_task else [])
        for x, variant in enumerate(variants):
            values = _values(store, f"{task}/{variant}")
            if values:
                ax.bar(x, statistics.fmean(values), color=colours.get(variant, "#9467bd"), alpha=0.6)
                ax.scatter([x + 0.12 * ((i % 5) - 2) / 2 for i in range(len(values))], values, color="k", s=12,
                           zorder=3)
        ax.set_xticks(range(len(variants)), [v.replace("_", "-") for v in variants])
        low = [v for variant in variants for v in _values(store, f"{task}/{variant}")]
        if low:
            ax.set_ylim(min(low) - 3, max(low) + 2)
        metric = "F1" if REPORTED[task] == "f1" else "accuracy"
        ax.set_title(f"{TASK_NAMES[task]} dev {metric} ({2 * per_class(args, task):,} training rows)")
        ax.grid(axis="y", alpha=0.3)
    ax = axes[1][0]
    for variant, colour, label in [(SEMI_BASE, "#888888", "fine-tuning (λ = 0)"),
                                   (semi_variant(args), "#1f77b4", f"RECLAIM K = {args.semi_k}")]:
        xs, means = [], []
        for p in args.semi_fractions:
            values = _values(store, f"{args.semi_task}/semi{pct(p)}/{variant}")
            if values:
                shift = 0.97 if variant == SEMI_BASE else 1.03
                ax.scatter([100 * p * shift] * len(values), values, color=colour, s=12, alpha=0.7)
                xs.append(100 * p)
                means.append(statistics.fmean(values))
        if xs:
            ax.plot(xs, means, "-o", color=colour, label=label)
    ax.set_xscale("log")
    if args.semi_fractions:
        ax.set_xticks([100 * p for p in args.semi_fractions], [f"{pct(p)} %" for p in args.semi_fractions])
        ax.minorticks_off()
    ax.set_xlabel("labelled share of the pool (%)")
    ax.set_ylabel("dev accuracy")
    ax.set_title(f"semi-supervised {TASK_NAMES[args.semi_task]}")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax = axes[1][1]
    labels, x = [], 0
    for task in args.tasks:
        variants = [PLAIN, top] + (list(args.ablations) if task == args.ablation_task else [])
        for variant in variants:
            values = _values(store, f"{task}/{variant}", "step_ms")
            if values:
                ax.bar(x, statistics.fmean(values), color=colours.get(variant, "#9467bd"), alpha=0.6)
                ax.scatter([x] * len(values), values, color="k", s=10, zorder=3)
            labels.append(f"{task}\n{variant.replace('_', '-')}")
            x += 1
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylabel("ms per optimisation step (median)")
    ax.set_title("time per step (shared 2-core CPU)")
    ax.grid(axis="y", alpha=0.3)
    ax = axes[1][2]
    items = [(f"{TASK_NAMES[t]}\ntop−plain", c) for t, c in table1_comparisons(store, args)]
    items += [(f"{TASK_NAMES[args.ablation_task]}\ntop−{m.replace('_', '-')}", c)
              for m, c in ablation_comparisons(store, args)]
    items += [(f"semi\n{pct(p)} %", c) for p, c in semi_comparisons(store, args)]
    for i, (_label, c) in enumerate(items):
        if not c.seeds:
            continue
        ax.scatter([i] * len(c.seeds), [t - b for t, b in zip(c.treatment_values, c.baseline_values, strict=True)],
                   color="#999999", s=10)
        if not math.isnan(c.low):
            ax.errorbar(i, c.mean_difference, yerr=[[c.mean_difference - c.low], [c.high - c.mean_difference]],
                        fmt="o", color="#1f77b4" if c.reproduced else "k", capsize=4)
        else:
            ax.plot(i, c.mean_difference, "o", color="k")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(items)), [label for label, _ in items], fontsize=7)
    ax.set_ylabel("paired Δ (points), 95 % CI")
    ax.set_title("differences (paper's direction: > 0)")
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle("RECLAIM on all-MiniLM-L6-v2: dev scores of the final weights (dots: seeds)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------ command line


def build_parser() -> argparse.ArgumentParser:
    p = harness.parser(__doc__.split("\n\n")[0], budget_minutes=90)
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="default %(default)s")
    p.add_argument("--tasks", nargs="*", default=list(TASKS), choices=TASKS, help="Table-1 tasks")
    p.add_argument("--ablations", nargs="*", default=list(ABLATIONS), choices=ABLATIONS,
                   help="§5.4 ablations (on --ablation-task)")
    p.add_argument("--ablation-task", default="sst2", choices=TASKS)
    p.add_argument("--semi-fractions", nargs="*", type=float, default=[0.01, 0.05, 0.1],
                   help="semi-supervised labelled shares (none: skip the part)")
    p.add_argument("--semi-task", default="sst2", choices=TASKS)
    p.add_argument("--semi-pool", type=int, default=20_000,
                   help="the shares are drawn from the first N training rows (0: the whole set); default %(default)s")
    p.add_argument("--semi-k", type=int, default=10, help="K in the semi-supervised setting (paper: 10)")
    p.add_argument("--k", type=int, default=100, help="K of Table 1 (paper: 100)")
    p.add_argument("--sst2-per-class", type=int, default=750, help="SST-2 training rows per class (Table 1)")
    p.add_argument("--mrpc-per-class", type=int, default=300, help="MRPC training rows per class")
    p.add_argument("--rte-per-class", type=int, default=300, help="RTE training rows per class")
    p.add_argument("--epochs", type=float, default=3, help="paper: 3")
    p.add_argument("--max-length", type=int, default=128, help="tokens per text or pair (run_glue: 128)")
    p.add_argument("--eval-limit", type=int, default=None, help="first N dev rows (smoke tests only)")
    p.add_argument("--keep-runs", action="store_true", help="keep the run folders (checkpoints: ~430 MB a run)")
    p.add_argument("--estimate", action="store_true", help="print the plan and its estimated minutes, run nothing")
    p.add_argument("--benchmarks", default=str(BENCHMARKS),
                   help="the file whose bench/reclaim_overhead.py block the report reads (default %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    store = harness.RecordStore(NAME, args.results)
    check_compatible(store, args)
    reference = functools.partial(reference_seconds, args)
    if args.estimate:
        for setting in settings(args):
            print(f"{setting:24s} {n_train(args, setting):6d} rows  {reference(setting):6.0f} s per seed")
        minutes = cost.plan_minutes(reference_seconds, args, plan(args))
        print(f"{len(plan(args))} runs, ≈ {minutes:.1f} min on a quiet 2-core machine")
        return 0
    left = 0
    if not args.report_only:
        run = functools.partial(run_one, args)
        left = harness.run_plan(store, plan(args), run, harness.Budget(args.budget_minutes), reference)
    harness.write_report(store, report(store, args))
    plot(store, args, Path(args.results) / f"{NAME}.png")
    print(f"[{NAME}] report: {Path(args.results) / (NAME + '.md')}; {left} run(s) left", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
