"""Benchmark: training data at 1M, 10M and 100M rows, in memory (today's path) and as a column store.

Usage::

    python bench/data_scale.py [--sizes 1_000_000,10_000_000,100_000_000] [--memory-max 1_000_000]
                               [--batch-size 64] [--steps 2] [--model NAME] [--workdir DIR] [--timeout 3600]
                               [--arms memory,columns-first,columns-cached,no-duplicates]
                               [--output BENCHMARKS.md] [--section-suffix TEXT] [--quick]

For each size a pair file (``anchor,positive`` CSV) of short random sentences is generated (3 to 8 pseudo-words
from a fixed list, seeded: the same file every run) in a temporary folder under ``--workdir`` (default: the
system's temporary directory), which is deleted at the end, and each arm trains ``--steps`` steps of the mnrl recipe
of ``--model`` (default the bundled all-MiniLM-L6-v2) in a fresh process: ``contrastext train mnrl`` itself,
run in the worker (no evaluation, the model saved at the end):

- **memory** (sizes up to ``--memory-max``): ``--set data.storage=memory``, the default: every row a Python
  Example, the blank-text and duplicate-positive checks, ``RandomBatchSampler``;
- **columns, first run**: ``--set data.storage=columns``: the file converted (streaming) into a column store in
  the cache folder (``$CONTRASTEXT_CACHE``), the duplicate-positive check on the hashes (up to 20M rows),
  ``ColumnRandomBatchSampler``, each batch's rows read from the store;
- **columns, cached**: the same again, the store opened from the cache;
- **columns, cached, no_duplicates**: the same with ``--set data.batch_sampler=no_duplicates``
  (``ColumnNoDuplicatesBatchSampler``: the texts shared by two rows found on the hash column, the walk over those
  rows only).

``--arms`` runs some of them (the cached ones need ``columns-first``, which converts the file).

Measured in each worker: the seconds from its start (torch and contrastext not yet imported) to the training
data being loaded (``load_training_data`` returning) and to the first step's log record, and its peak resident set (``VmHWM``) at the end. The model
baseline is the same run on a file of 1,000 rows: "RSS growth" is a run's peak minus that baseline's. Before
each size the free disk space is checked against what the file and its store need (estimated from the bytes per
row of the baseline file); a size that does not fit stops the bench there and the report says so.
``--quick`` is a smoke run (3,000 rows, one step of batch size 16): its numbers mean nothing. The report goes to
stdout and, with ``--output``, replaces the block between ``<!-- begin bench/data_scale.py -->`` /
``<!-- end ... -->`` of that file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
import child_process  # noqa: E402
import common  # noqa: E402
import markdown_block  # noqa: E402

SCRIPT = "data_scale.py"
SECTION = "## Training data at scale: in memory vs a memory-mapped column store"
ARMS = ("memory", "columns-first", "columns-cached", "no-duplicates")
ARM_NAMES = {"memory": "in memory (today)", "columns-first": "columns, first run (converts)",
             "columns-cached": "columns, cached", "no-duplicates": "columns, cached, no_duplicates"}
ARM_SETS = {"no-duplicates": ["data.batch_sampler=no_duplicates"]}
"""Settings an arm adds to the run's."""
BASELINE_ROWS = 1000
GENERATE_CHUNK = 100_000
STORE_BYTES_PER_ROW = 48
"""The store's bytes a row besides the texts: two 4-byte offsets, an 8-byte line, two 8-byte hashes, a 4-byte
length, with room."""
DISK_MARGIN = 2 * 2**30
SEED = 0
MODEL = "bundled:all-MiniLM-L6-v2"


def words() -> list[str]:
    """5,000 pseudo-words of 2 or 3 syllables, the same in every process."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    syllables = [consonant + vowel for consonant in "bdfgklmnprstvz" for vowel in "aeiou"]
    return ["".join(rng.choice(syllables, size=int(rng.integers(2, 4))).tolist()) for _ in range(5000)]


def generate(path: Path, rows: int) -> None:
    """``rows`` (anchor, positive) rows of 3 to 8 words each, seeded chunk by chunk (bounded memory). The words
    are letters only, so the lines need no CSV quoting."""
    import numpy as np

    vocabulary = words()
    with path.open("w") as handle:
        handle.write("anchor,positive\n")
        for start in range(0, rows, GENERATE_CHUNK):
            count = min(GENERATE_CHUNK, rows - start)
            rng = np.random.default_rng([SEED, start])
            picked = rng.integers(0, len(vocabulary), size=(count, 2, 8)).tolist()
            sizes = rng.integers(3, 9, size=(count, 2)).tolist()
            handle.write("".join(
                " ".join([vocabulary[word] for word in anchor[:size[0]]]) + ","
                + " ".join([vocabulary[word] for word in positive[:size[1]]]) + "\n"
                for (anchor, positive), size in zip(picked, sizes, strict=True)))


def worker(args: argparse.Namespace) -> int:
    """One arm on one file: ``contrastext train mnrl`` itself (in this process, ``data.storage`` memory or
    columns, ``--steps`` steps, no evaluation), timed from the worker's start to the training data being loaded
    (``load_training_data`` returning) and to the first step's log record; peak RSS; into ``--result`` (JSON)."""
    start = time.perf_counter()
    os.environ["CONTRASTEXT_CACHE"] = args.cache  # the store goes to the bench's folder
    import contrastext.runs.simcse as simcse
    from contrastext.cli import main as contrastext_main
    from contrastext.training.logging import RunLogger

    marks: dict = {}
    load, log = simcse.load_training_data, RunLogger.log

    def timed_load(*a, **k):
        data = load(*a, **k)
        marks.setdefault("data_ready", time.perf_counter() - start)
        marks["batches"] = len(data.examples) // args.batch_size
        return data

    def timed_log(self, record):
        log(self, record)
        if "loss" in record:
            marks.setdefault("first_step", time.perf_counter() - start)
            marks["loss"] = record["loss"]

    simcse.load_training_data, RunLogger.log = timed_load, timed_log
    storage = "memory" if args.worker == "memory" else "columns"
    output = Path(args.cache).parent / f"run-{args.worker}-{Path(args.file).stem}"
    sets = [f"data.path={args.file}", f"data.storage={storage}", f"model={args.model}", "train.epochs=null",
            f"train.max_steps={args.steps}", f"train.batch_size={args.batch_size}", "eval.tasks=[]",
            "train.metric_for_best=null", "train.save_every=null", "train.log_every=1", "train.progress_bar=false",
            "train.report_to=none", f"seed={SEED}", *ARM_SETS.get(args.worker, [])]
    try:
        contrastext_main(["train", "mnrl", "--output", str(output), *[part for key in sets for part in ("--set", key)]])
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    shutil.rmtree(output, ignore_errors=True)
    if code != 0:
        return code
    result = {"peak_mib": common.status_mib("VmHWM"), **marks}
    Path(args.result).write_text(json.dumps(result))
    return 0


def run_arm(args: argparse.Namespace, arm: str, file: Path, folder: Path) -> dict:
    """One arm on ``file`` in a fresh process (``{"timeout": True}`` past ``--timeout``)."""
    result = folder / f"{arm}-{file.stem}.json"
    worker_args = ["--file", str(file), "--cache", str(folder / "cache"), "--batch-size", str(args.batch_size),
                   "--steps", str(args.steps), "--model", args.model]
    done = child_process.run_worker(__file__, arm, result, worker_args, args.threads, args.timeout)
    print(f"  {file.stem} {arm}: {done}", file=sys.stderr, flush=True)
    return done


def bytes_per_row(file: Path, rows: int) -> float:
    return file.stat().st_size / rows


def measure(args: argparse.Namespace) -> tuple[dict, dict[int, dict], str | None]:
    """The baseline, every size that fits on the disk, and why the bench stopped (None: every size ran)."""
    folder = Path(tempfile.mkdtemp(prefix="data_scale-", dir=args.workdir))
    results: dict[int, dict] = {}
    stopped = None
    try:
        tiny = folder / "baseline.csv"
        generate(tiny, BASELINE_ROWS)
        per_row = bytes_per_row(tiny, BASELINE_ROWS)
        baseline = {arm: run_arm(args, arm, tiny, folder) for arm in ("memory", "columns-first")}
        for size in args.sizes:
            needed = size * (2 * per_row + STORE_BYTES_PER_ROW) + DISK_MARGIN  # the file, the texts again, the rest
            free = shutil.disk_usage(folder).free
            if needed > free:
                stopped = (f"stopped before {size:,} rows: the file and its store need ~{needed / 2**30:.1f} GiB, "
                           f"{free / 2**30:.1f} GiB free on {folder.parent}")
                break
            file = folder / f"pairs-{size}.csv"
            started = time.perf_counter()
            generate(file, size)
            entry: dict = {"generate": time.perf_counter() - started, "csv_gib": file.stat().st_size / 2**30}
            for arm in args.arms:
                if arm == "memory" and size > args.memory_max:
                    continue
                entry[arm] = run_arm(args, arm, file, folder)
                if arm == "columns-first":
                    entry["store_gib"] = sum(item.stat().st_size for item in (folder / "cache").rglob("*")
                                             if item.is_file()) / 2**30
            results[size] = entry
            file.unlink()
            shutil.rmtree(folder / "cache", ignore_errors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return baseline, results, stopped


def cell(run: dict | None, key: str, baseline: float | None = None) -> str:
    if run is None:
        return "–"
    if run.get("timeout"):
        return "timed out"
    value = run[key] - (baseline or 0.0)
    return f"{value:.0f} MiB" if key == "peak_mib" else f"{value:.1f} s"


def render(args: argparse.Namespace, load_before, baseline: dict, results: dict[int, dict], stopped: str | None) -> str:
    import torch

    versions = (f"torch {torch.__version__}, {args.threads} thread(s); batch size {args.batch_size}, "
                f"{args.steps} step(s) of {args.model}, seed {SEED}")
    details = ["each arm in a fresh process; times from the worker's start, torch and contrastext imports included; "
               f"RSS growth = the run's VmHWM minus the columns run on {BASELINE_ROWS:,} rows "
               f"({baseline['columns-first']['peak_mib']:.0f} MiB; in memory: "
               f"{baseline['memory']['peak_mib']:.0f} MiB)",
               stopped or "every size asked for ran"]
    conditions = common.run_conditions(SCRIPT, args.argv, "cpu", load_before, versions, details)
    floor = baseline["columns-first"]["peak_mib"]
    lines = ["| rows | CSV | store | arm | data ready | first step | RSS growth over the model |",
             "|---|---|---|---|---|---|---|"]
    for size, entry in results.items():
        for arm in ARMS:
            if arm not in entry:
                continue
            run = entry[arm]
            lines.append(f"| {size:,} | {entry['csv_gib']:.2f} GiB | {entry.get('store_gib', float('nan')):.2f} GiB "
                         f"| {ARM_NAMES[arm]} | {cell(run, 'data_ready')} | {cell(run, 'first_step')} | "
                         f"{cell(run, 'peak_mib', floor)} |")
    begin, end = markdown_block.markers(SCRIPT, args.section_suffix)
    return "\n".join([begin, *conditions, "", "### RSS and start-up per size", "", *lines, end]) + "\n"


def row_count(text: str) -> int:
    return int(text.replace("_", ""))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=lambda text: [row_count(part) for part in text.split(",") if part],
                        default=[1_000_000, 10_000_000, 100_000_000], help="comma-separated row counts")
    parser.add_argument("--memory-max", type=row_count, default=1_000_000,
                        help="largest size the in-memory arm runs at (default 1M)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--model", default=MODEL, help=f"the model trained (default {MODEL})")
    parser.add_argument("--workdir", type=Path, default=None, help="where the temporary folder goes")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds an arm may run (default 3600)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--arms", type=lambda text: [part for part in text.split(",") if part], default=list(ARMS),
                        help=f"comma-separated arms to run (default all, in this order: {','.join(ARMS)})")
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3,000 rows, one step of 16")
    markdown_block.add_suffix_option(parser)
    common.add_worker_options(parser)
    parser.add_argument("--file", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.steps, args.batch_size = [3000], 1, 16
    if not args.sizes or min(args.sizes) < args.batch_size * args.steps or args.batch_size < 1 or args.steps < 1:
        parser.error("need sizes of at least --batch-size × --steps rows, --batch-size >= 1 and --steps >= 1")
    unknown = [arm for arm in args.arms if arm not in ARMS]
    if unknown or not args.arms:
        parser.error(f"--arms: unknown arm(s) {','.join(unknown) or '(none given)'}; known: {','.join(ARMS)}")
    if "columns-first" not in args.arms and {"columns-cached", "no-duplicates"} & set(args.arms):
        parser.error("--arms: columns-cached and no-duplicates open the store that columns-first converts: "
                     "add columns-first")
    args.arms = [arm for arm in ARMS if arm in args.arms]
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker is not None:
        return worker(args)
    load_before = os.getloadavg()
    report = render(args, load_before, *measure(args))
    common.publish_report(report, args, SCRIPT, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
