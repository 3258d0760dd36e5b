"""RECLAIM's hook (experiments/specs/reclaim.yaml): one run with its per-step time, and the overhead figures of
BENCHMARKS.md's ``bench/reclaim_overhead.py`` blocks for the page (read from the blocks, never typed in)."""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

import harness
import significance as sig

REPORTED = {"sst2": "accuracy", "mrpc": "f1", "rte": "accuracy"}  # GLUE's figure of each task (MRPC: F1)
BENCHMARKS = harness.REPO / "BENCHMARKS.md"
INTERLEAVED = ("(67k rows, interleaved)", "(1M rows, interleaved)")  # the `--interleave` blocks: time paired in a process


# ------------------------------------------------------------------------------------------------ a run


def step_sizes(n: int, batch: int, steps: int) -> list[int]:
    """Examples in each step of a ``drop_last: false`` run over ``n`` rows (the epoch's last batch is smaller)."""
    per_epoch = max(1, math.ceil(n / batch))
    last = n - batch * (per_epoch - 1)
    return [last if (i + 1) % per_epoch == 0 else min(batch, n) for i in range(steps)]


def timing(records: list[dict], n: int, batch: int = 32) -> dict:
    """Per-step time from a ``log_every=1`` train log: ``step_ms`` the median full batch after the first step
    (which also starts the data loader), ``train_s`` the sum over the steps."""
    records = sorted((r for r in records if "samples_per_s" in r and "step" in r), key=lambda r: r["step"])
    if not records:
        return {"steps": 0, "step_ms": None, "step_ms_mean": None, "train_s": None}
    steps = records[-1]["step"]
    contiguous = [r["step"] for r in records] == list(range(1, steps + 1))
    sizes = step_sizes(n, batch, steps) if contiguous else [min(batch, n)] * len(records)
    timed = [(size, size / r["samples_per_s"]) for size, r in zip(sizes, records, strict=False) if r["samples_per_s"] > 0]
    seconds = [t for _, t in timed]
    full = [t for size, t in timed[1:] if size == min(batch, n)] or seconds
    return {"steps": steps, "step_ms": 1000 * statistics.median(full), "step_ms_mean": 1000 * statistics.fmean(seconds),
            "train_s": sum(seconds)}


def loss_at_end(records: list[dict], key: str, share: float = 0.1) -> float | None:
    """Mean of a logged loss part over the last ``share`` of its records (None when it was not logged)."""
    values = [float(r[key]) for r in records if r.get(key) is not None and math.isfinite(float(r[key]))]
    return statistics.fmean(values[-max(1, round(share * len(values))):]) if values else None


def train_arm(run, args) -> tuple[dict, dict]:
    """One run (the scl recipe at λ = 0 for a plain arm, else reclaim): the dev scores of the final weights, the
    per-step time and the loss parts at the end; a run with a skipped (non-finite) step is not recorded."""
    import run as runner  # experiments/run.py

    from contrastext import load_config, read_log, recipe_path, run_recipe

    plain = run.recipe == "scl"
    config = load_config(recipe_path(run.recipe), run.overrides)
    summary = run_recipe(config, data_root=Path(args.data_root))
    result = summary["runs"][str(run.seed)] if plain else summary
    task, scores, report = config.data.task, result["metrics"], result.get("report") or {}
    log = read_log(result["log_path"])
    n = int(report["n_train"])
    metrics = {"metric": runner.finite(scores[f"{task}_dev_{REPORTED[task]}"]),
               **{key: runner.finite(scores.get(f"{task}_dev_{key}")) for key in ("accuracy", "f1", "mcc")},
               "n_train": n, "n_eval": report.get("n_eval"), **timing(log, n),
               "task_loss_end": runner.finite(loss_at_end(log, "loss/ce" if plain else "loss/task")),
               "ans_end": None if plain else runner.finite(loss_at_end(log, "loss/ans"))}
    if report.get("train_label_counts"):
        metrics["train_label_counts"] = report["train_label_counts"]
    skipped = max((int(r.get("skipped_nonfinite", 0)) for r in log), default=0)
    if metrics["metric"] is None or skipped:
        raise RuntimeError(f"{run.name} seed {run.seed}: dev {REPORTED[task]} {metrics['metric']}, {skipped} step(s) "
                           f"skipped for a non-finite loss (see {result['log_path']}); not recorded")
    folder = run.output_dir / f"seed-{run.seed}" if plain else run.output_dir  # scl trains under seed-<s>/
    inputs = runner.run_folder_record(folder, Path(args.data_root))
    runner.remove(run.output_dir)  # checkpoints: ~430 MB a run
    return metrics, inputs


# ------------------------------------------------------------------------------ the bench's overhead blocks


def bench_block(path: Path = BENCHMARKS, suffix: str = "") -> str | None:
    """The text between ``bench/reclaim_overhead.py``'s markers (``suffix`` appended) in ``path``, or None."""
    begin, end = harness.load_module(harness.REPO / "bench" / "markdown_block.py", "bench_markdown_block").markers(
        "reclaim_overhead.py", suffix)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if begin not in text or end not in text.split(begin, 1)[1]:
        return None
    return text.split(begin, 1)[1].split(end, 1)[0]


def block_rows(block: str) -> list[dict[str, str]]:
    """The rows of the block's table as {column header: cell}."""
    lines = [line.strip() for line in block.splitlines() if line.strip().startswith("|")]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return [dict(zip(cells[0], row, strict=False)) for row in cells[2:]] if len(cells) >= 3 else []


def bench_overhead(path: Path = BENCHMARKS, suffix: str = "") -> dict:
    """What the block says of top-K with the kept IVF index: per bank size, the time over the baseline in % and
    the extra peak MiB; ``status``: ``ok``, ``missing`` (no block) or ``no top-K rows``."""
    block = bench_block(path, suffix)
    if block is None:
        return {"status": "missing", "path": str(path)}
    rows = []
    for row in block_rows(block):
        if row.get("negatives") == "top-K" and row.get("search", "").startswith("ivf"):
            with_ratio = re.fullmatch(r"[0-9.]+", row.get("time vs baseline", ""))
            if with_ratio:
                rows.append({"bank_rows": row.get("bank rows", "?"), "extra_mib": row.get("+ MiB", "?"),
                             "time_pct": 100 * (float(row["time vs baseline"]) - 1)})
    date = next((line[len("- date:"):].split(";")[0].strip() for line in block.splitlines()
                 if line.startswith("- date:")), "undated")
    k = re.search(r"\bK = (\d+)", block)
    return {"status": "ok" if rows else "no top-K rows", "path": str(path), "date": date, "rows": rows,
            "k": k.group(1) if k else "?",
            "in_batch_mib": [r.get("+ MiB", "?") for r in block_rows(block) if r.get("negatives") == "in_batch"]}


def _sentences():
    """The macros ``text`` and ``numbers`` of experiments/pages/reclaim_bench.md."""
    import spec as specs

    return specs.TEMPLATES.from_string((harness.REPO / "experiments" / "pages" / "reclaim_bench.md").read_text(
        encoding="utf-8")).module


def paired_overhead(path: Path = BENCHMARKS) -> dict:
    """:func:`bench_overhead` of the :data:`INTERLEAVED` blocks there are, merged: their rows in turn, their dates
    and ``blocks`` (the suffixes read); the first block's result when none has a top-K row."""
    found = [(suffix, bench_overhead(path, suffix)) for suffix in INTERLEAVED]
    read = [(suffix, result) for suffix, result in found if result["status"] == "ok"]
    if not read:
        return found[0][1]
    return {**read[0][1], "date": " and ".join(result["date"] for _, result in read),
            "rows": [row for _, result in read for row in result["rows"]], "blocks": [suffix for suffix, _ in read]}


def bench_text(path: Path = BENCHMARKS) -> str:
    """One plain sentence of what the blocks say (or that they are absent)."""
    return str(_sentences().text(bench_overhead(path), paired_overhead(path)))


def bench_numbers(path: Path = BENCHMARKS) -> str:
    """The summary row's part: top-K time per bank size (the paired blocks' where there are) and memory."""
    return str(_sentences().numbers(bench_overhead(path), paired_overhead(path)))


# ------------------------------------------------------------------------------------------------ page


def overhead(values, treatment: str, baseline: str, short: bool = False) -> str:
    """Per-step time of ``treatment`` over ``baseline`` (same seed) in %: mean ± std (n, 95 % t-interval); the mean
    alone with ``short``."""
    t, b = values(treatment, "step_ms"), values(baseline, "step_ms")
    ratios = [100 * (t[s] / b[s] - 1) for s in sorted(set(t) & set(b))]
    if not ratios:
        return "–"
    mean, std = harness.mean_std(ratios)
    if short:
        return f"{mean:+.1f} %"
    low, high = sig.t_interval(ratios)
    return f"{mean:+.1f} % ± {std:.1f} (n = {len(ratios)}" + ("" if math.isnan(low) else f", t-interval [{low:+.1f}, {high:+.1f}]") + ")"


def context(page: dict) -> dict:
    """The page's extra functions: ``overhead(t, b)``, the bench sentence and numbers."""
    values = page["values"]
    return {"overhead": lambda t, b, short=False: overhead(values, t, b, short),
            "bench": bench_text(), "bench_numbers": bench_numbers()}
