"""Benchmark: ``data.batch_sampler=no_duplicates`` (contrastext's ``NoDuplicatesBatchSampler``) against
sentence-transformers' ``NoDuplicatesBatchSampler``, plain and with ``precompute_hashes=True``
(``BatchSamplers.NO_DUPLICATES_HASHED``), on 1M rows.

Usage::

    python bench/no_duplicates_sampler.py [--rows 1_000_000] [--batch-size 64] [--regimes repeated,frequent]
                                          [--rounds 3] [--timeout 1800] [--output BENCHMARKS.md]
                                          [--section-suffix TEXT] [--quick]

The rows: synthetic (anchor, positive) pairs of texts of about 100 characters (one of 1,000 fixed sentences
of random words, then the text's id, so every id is a distinct text), plus a ``label`` column that
sentence-transformers' ``valid_label_columns`` leaves out:

- ``repeated``: every anchor in 3 rows (a question with three answers, an NLI premise with its hypotheses),
  the positives distinct: a batch of 64 defers a few rows, which the next batch takes;
- ``frequent``: the same, plus one anchor in 5 % of the rows (a boilerplate text): about 3 such rows reach every
  batch and one is taken, so the deferred rows pile up (~2 more per batch). A walk over the deferred rows
  (sentence-transformers') visits all of them in every batch: quadratic in the rows.

Each arm runs in a fresh process (this script with ``--worker``), the arms round-robin for ``--rounds`` rounds
(medians): the rows are made (ours: the tuples of texts, as the trainer passes them; sentence-transformers: a
``datasets.Dataset`` of the same rows) before the clock, then **first epoch** = the sampler built + epoch 0's
batches, **next epoch** = epoch 1's batches; peak RSS (VmHWM, reset after the rows are made) above the RSS
before the sampler. An arm still running after ``--timeout`` seconds is stopped and shown as ``> T s``.
The batches' SHA-256 says whether the arms gave the same batches (ours equals sentence-transformers' on the same
rows and seed: tests/data/test_batch_samplers.py). ``--quick`` is a smoke run (20,000 rows, one round): its
numbers mean nothing. The report goes to stdout and, with ``--output``, replaces the block between
``<!-- begin bench/no_duplicates_sampler.py -->`` / ``<!-- end ... -->`` of that file. Exit status 1 when an
arm that finished gave other batches than ours.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
import common  # noqa: E402
import markdown_block  # noqa: E402

SCRIPT = "no_duplicates_sampler.py"
BEGIN_MARKER, END_MARKER = markdown_block.markers(SCRIPT)  # --section-suffix appends to them
SECTION = "## Batches without duplicates: data.batch_sampler=no_duplicates vs sentence-transformers"
ARMS = ("ours", "st", "st-hashed")
ARM_NAMES = {
    "ours": "contrastext `no_duplicates`",
    "st": "ST `NoDuplicatesBatchSampler`",
    "st-hashed": "ST `NO_DUPLICATES_HASHED` (xxhash)",
}
REGIMES = ("repeated", "frequent")
SEED = 42
FREQUENT_SHARE = 0.05


def make_rows(count: int, regime: str) -> list[tuple[str, str]]:
    """The regime's (anchor, positive) rows, the same in every process."""
    import numpy as np

    rng = np.random.default_rng(0)
    words = [f"w{index}" for index in range(5000)]
    bases = [" ".join(rng.choice(words, size=16).tolist()) for _ in range(1000)]
    hot = rng.random(count) < (FREQUENT_SHARE if regime == "frequent" else 0.0)
    rows = []
    for index in range(count):
        anchor_id = index // 3
        anchor = "a frequent anchor text, the same in many rows" if hot[index] else (
            f"{bases[anchor_id % 1000]} anchor {anchor_id}")
        rows.append((anchor, f"{bases[(index * 7) % 1000]} positive {index}"))
    return rows


def digest(batches) -> str:
    hasher = hashlib.sha256()
    for batch in batches:
        hasher.update(json.dumps([int(index) for index in batch]).encode())
    return hasher.hexdigest()[:16]


def worker(args: argparse.Namespace) -> int:
    """One arm on one regime: times, RSS, digest into ``--result`` (JSON)."""
    rows = make_rows(args.rows, args.regime)
    if args.worker.startswith("st"):
        import torch
        from datasets import Dataset
        from sentence_transformers.base.sampler import NoDuplicatesBatchSampler as STSampler

        dataset = Dataset.from_dict({"anchor": [row[0] for row in rows], "positive": [row[1] for row in rows],
                                     "label": [0] * len(rows)})
        del rows

        def build():
            return STSampler(dataset, batch_size=args.batch_size, drop_last=True, valid_label_columns=["label", "score"],
                             generator=torch.Generator(), seed=SEED, precompute_hashes=args.worker == "st-hashed")

        def epoch(sampler, number):
            sampler.set_epoch(number)
            return [list(batch) for batch in sampler]
    else:
        from contrastext.data.batch_samplers import NoDuplicatesBatchSampler

        def build():
            return NoDuplicatesBatchSampler(rows, args.batch_size, SEED, drop_last=True)

        def epoch(sampler, number):
            return sampler.batches(number)

    common.reset_peak_rss()
    rss_before = common.status_mib("VmRSS")
    start = time.perf_counter()
    sampler = build()
    first = epoch(sampler, 0)
    first_seconds = time.perf_counter() - start
    start = time.perf_counter()
    epoch(sampler, 1)
    next_seconds = time.perf_counter() - start
    result = {"first": first_seconds, "next": next_seconds, "batches": len(first), "digest": digest(first),
              "rss_mib": common.status_mib("VmHWM") - rss_before}
    Path(args.result).write_text(json.dumps(result))
    return 0


def run_arm(args: argparse.Namespace, arm: str, regime: str, folder: str) -> dict:
    """One arm in a fresh process; ``{"timeout": True}`` when it ran past ``--timeout``."""
    result = Path(folder) / f"{arm}-{regime}.json"
    command = [sys.executable, __file__, "--worker", arm, "--result", str(result), "--regime", regime,
               "--rows", str(args.rows), "--batch-size", str(args.batch_size)]
    environment = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=environment)
    except subprocess.TimeoutExpired:
        return {"timeout": True}
    if done.returncode != 0:
        raise SystemExit(f"{arm} on {regime} failed:\n{done.stderr[-3000:]}")
    return json.loads(result.read_text())


def measure(args: argparse.Namespace) -> dict[str, dict[str, list[dict]]]:
    """Every regime's arms, round-robin (order reversed every round); an arm that timed out is not rerun."""
    results: dict[str, dict[str, list[dict]]] = {regime: {arm: [] for arm in args.arms} for regime in args.regimes}
    with tempfile.TemporaryDirectory() as folder:
        for regime in args.regimes:
            for round_index in range(args.rounds):
                order = list(args.arms) if round_index % 2 == 0 else list(reversed(args.arms))
                for arm in order:
                    runs = results[regime][arm]
                    if runs and runs[-1].get("timeout"):
                        continue
                    runs.append(run_arm(args, arm, regime, folder))
                    print(f"  {regime} round {round_index + 1}/{args.rounds} {arm}: {runs[-1]}", file=sys.stderr,
                          flush=True)
    return results


def cell(runs: list[dict], key: str, timeout: float) -> str:
    if any(run.get("timeout") for run in runs):
        return f"> {timeout:.0f} s (stopped)"
    return f"{statistics.median(run[key] for run in runs):.2f} s"


def render(args: argparse.Namespace, load_before, results) -> tuple[str, bool]:
    import sentence_transformers
    import torch

    versions = (f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, "
                f"{args.threads} thread(s); {args.rows:,} rows, batch size {args.batch_size}, drop_last, seed {SEED}")
    details = [f"each arm in a fresh process, {args.rounds} round(s) round-robin, medians; timeout {args.timeout:.0f} s"]
    conditions = common.run_conditions(SCRIPT, args.argv, "cpu", load_before, versions, details)
    lines = ["| regime | arm | first epoch (build + epoch 0) | next epoch | peak RSS above start | batches | "
             "same batches as ours | first epoch, time / ours |", "|---|---|---|---|---|---|---|---|"]
    same_everywhere = True
    for regime in args.regimes:
        ours = results[regime].get("ours", [])
        ours_done = ours and not any(run.get("timeout") for run in ours)
        for arm in args.arms:
            runs = results[regime][arm]
            finished = not any(run.get("timeout") for run in runs)
            if finished:
                same = ours_done and runs[0]["digest"] == ours[0]["digest"]
                same_everywhere &= bool(same) or not ours_done
                ratio = (statistics.median(r["first"] for r in runs) / statistics.median(r["first"] for r in ours)
                         if ours_done else float("nan"))
                row = [f"{statistics.median(r['rss_mib'] for r in runs):.0f} MiB", str(runs[0]["batches"]),
                       "yes" if same else "no", f"{ratio:.1f}×"]
            else:
                row = ["–", "–", "–", "–"]
            lines.append(f"| {regime} | {ARM_NAMES[arm]} | {cell(runs, 'first', args.timeout)} | "
                         f"{cell(runs, 'next', args.timeout)} | " + " | ".join(row) + " |")
    begin, end = markdown_block.markers(SCRIPT, args.section_suffix)
    report = "\n".join([begin, *conditions, "", "### One epoch's batches", "", *lines, end]) + "\n"
    return report, same_everywhere


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=lambda text: int(text.replace("_", "")), default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--regimes", type=lambda text: [part for part in text.split(",") if part],
                        default=list(REGIMES), help="comma-separated: repeated, frequent")
    parser.add_argument("--arms", type=lambda text: [part for part in text.split(",") if part], default=list(ARMS),
                        help="comma-separated: ours, st, st-hashed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds an arm may run (default 1800)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20,000 rows, one round")
    markdown_block.add_suffix_option(parser)
    common.add_worker_options(parser)
    parser.add_argument("--regime", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [name for name in args.regimes if name not in REGIMES] + [name for name in args.arms if name not in ARMS]
    if unknown:
        parser.error(f"unknown regime or arm: {', '.join(unknown)} (regimes {', '.join(REGIMES)}; arms {', '.join(ARMS)})")
    if args.rows < args.batch_size or args.batch_size < 1 or args.rounds < 1:
        parser.error("need --rows >= --batch-size >= 1 and --rounds >= 1")
    args.argv = argv
    if args.quick:
        args.rows, args.rounds = 20_000, 1
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker is not None:
        return worker(args)
    load_before = os.getloadavg()
    report, same = render(args, load_before, measure(args))
    common.publish_report(report, args, SCRIPT, SECTION)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
