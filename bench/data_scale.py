"""Benchmark: training data at 1M, 10M and 100M rows, in memory (today's path) and as a column store.

Usage::

    python bench/data_scale.py [--sizes 1_000_000,10_000_000,100_000_000] [--memory-max 1_000_000]
                               [--batch-size 64] [--steps 2] [--model NAME] [--workdir DIR] [--timeout 3600]
                               [--output BENCHMARKS.md] [--section-suffix TEXT] [--quick]

For each size a pair file (``anchor,positive`` CSV) of short random sentences is generated (3 to 8 pseudo-words
from a fixed list, seeded: the same file every run) in a temporary folder under ``--workdir`` (default: the
system's temporary directory), which is deleted at the end, and each arm trains ``--steps`` MNRL steps (scale 20,
AdamW) of ``--model`` (default the bundled all-MiniLM-L6-v2) in a fresh process, through the library API
that ``contrastext train mnrl`` uses:

- **memory** (sizes up to ``--memory-max``): ``read_texts`` -> a list of Examples, the blank-text and
  duplicate-positive checks, ``RandomBatchSampler``: what a run does today;
- **columns, first run**: :func:`contrastext.data.column_convert.column_examples` converts the file (streaming)
  into a column store in a cache folder, then the duplicate-positive check on the hashes and
  ``ColumnRandomBatchSampler``;
- **columns, cached**: the same again, the store opened from the cache.

Measured in each worker: the seconds from its start (torch and contrastext not yet imported) to the data being
ready and to the end of the first optimiser step, and its peak resident set (``VmHWM``) at the end. The model
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
ARMS = ("memory", "columns-first", "columns-cached")
ARM_NAMES = {"memory": "in memory (today)", "columns-first": "columns, first run (converts)",
             "columns-cached": "columns, cached"}
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
    """One arm on one file: seconds to the data and to the first step, peak RSS, into ``--result`` (JSON)."""
    start = time.perf_counter()
    import torch
    import torch.nn.functional as F

    from contrastext.models.encoder import TextEncoder
    from contrastext.models.names import resolve_model

    torch.manual_seed(SEED)
    if args.worker == "memory":
        from contrastext.data.quality import drop_blank, duplicate_positives
        from contrastext.data.sampling import RandomBatchSampler
        from contrastext.data.sources import DataSpec, read_texts

        examples, _ = drop_blank(list(read_texts(DataSpec(path=args.file), "pairs", "mnrl").examples))
        duplicate_positives(examples)
        batches = RandomBatchSampler(len(examples), args.batch_size, SEED).batches(0)

        def fetch(rows):
            return [examples[row] for row in rows]
    else:
        from contrastext.data.column_convert import column_examples
        from contrastext.data.column_quality import duplicate_positives
        from contrastext.data.column_sampling import column_batch_sampler

        store = column_examples(args.file, ["anchor", "positive"], cache_dir=args.cache, progress=False)
        duplicate_positives(store)
        batches = column_batch_sampler(store, "batch_sampler", False, args.batch_size, SEED).batches(0)
        fetch = store.take
    data_ready = time.perf_counter() - start
    encoder = TextEncoder.from_pretrained(resolve_model(args.model))
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=2e-5)
    first_step, loss = float("nan"), float("nan")
    for step in range(args.steps):
        rows = fetch(batches[step])
        anchors = encoder(**encoder.tokenize([row.texts[0] for row in rows], 64)).embedding
        positives = encoder(**encoder.tokenize([row.texts[1] for row in rows], 64)).embedding
        scores = 20 * F.normalize(anchors, dim=-1) @ F.normalize(positives, dim=-1).T
        loss_tensor = F.cross_entropy(scores, torch.arange(len(rows)))
        loss_tensor.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss = float(loss_tensor.detach())
        if step == 0:
            first_step = time.perf_counter() - start
    result = {"data_ready": data_ready, "first_step": first_step, "peak_mib": common.status_mib("VmHWM"),
              "batches": len(batches), "loss": loss}
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
            for arm in ARMS:
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
