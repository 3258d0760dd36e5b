"""Benchmark: where the time of RECLAIM's active negative selection (ANS) goes inside a step, part by part.

``bench/reclaim_overhead.py`` times whole training steps against plain fine-tuning. This script takes the ANS
part of a step apart, on one thread, on the same banks (that script's features: u and v of every SST-2 training
sentence at 67,349 rows, jittered copies of them at larger sizes, from its ``encode_features`` and ``fill_bank``)
and the ``reclaim`` recipe's settings (batch 32, K = 100, critic width 64, ``half_sum``, the method built by its
``build_row``):

- **objective**: the ANS loss of one batch (the critic on the batch's pairs and on each side's K nearest bank
  rows, each distinct row gathered and projected once), its backward, and the momentum update of both banks. The
  nearest rows are found once, before the timing, by the kept index, so no search is in these figures. The
  operators that take the most self CPU time over the timed steps (``torch.profiler``) say which arithmetic it is.
- **search**: ``IVFSearch.topk`` of one batch's queries on each bank, the index built once and kept (nothing
  re-indexed: ``changed`` is empty, as between two momentum updates), at each ``--nprobes`` value, with recall@K
  against ``ExactSearch`` over ``--recall-queries`` queries. The queries are bank rows, each excluded from its own
  result, as a batch's own rows are.

Before every timed call a 64 MiB buffer is written, so the caches hold what a training step leaves in them (the
encoder's forward and backward evict the banks), not the previous call's data. Each figure is the median over
``--steps`` calls after ``--warmup``.

Usage::

    python bench/ans_profile.py [--data-root DATA] [--bank-sizes 67349,1000000] [--nprobes 16,24,32,48,64,128]
                                [--steps 20] [--warmup 3] [--threads 1] [--recall-queries 512]
                                [--output BENCHMARKS.md] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
import common  # noqa: E402
import markdown_block  # noqa: E402
import reclaim_overhead  # noqa: E402

SCRIPT = "ans_profile.py"
HEADING = "## RECLAIM: where the time of active negative selection goes"
EVICT_BYTES = 64 << 20
TOP_OPERATORS = 8


def overhead_args(args: argparse.Namespace):
    """``reclaim_overhead``'s options for its set-up functions (features, banks, method)."""
    argv = ["--data-root", str(args.data_root), "--k", str(args.k), "--batch-size", str(args.batch_size),
            "--cache-dir", str(args.cache_dir), "--seed", str(args.seed)]  # fmt: skip
    if args.quick:
        argv.append("--quick")
    return reclaim_overhead.parse_args(argv)


class Evictor:
    """Writes a buffer larger than the caches before a timed call."""

    def __init__(self) -> None:
        import numpy as np

        self.buffer = np.zeros(EVICT_BYTES, dtype=np.uint8)

    def __call__(self) -> None:
        self.buffer += 1


def timed(call, evict: Evictor, steps: int, warmup: int) -> tuple[float, list]:
    """Median milliseconds of ``call()`` over ``steps`` calls after ``warmup``, the caches evicted before each;
    and the last call's result."""
    times, result = [], None
    for step in range(warmup + steps):
        evict()
        started = time.perf_counter()
        result = call()
        if step >= warmup:
            times.append(1000 * (time.perf_counter() - started))
    return statistics.median(times), result


def batch_rows(size: int, batch: int, generator):
    import torch

    return torch.randperm(size, generator=generator)[:batch]


def search_profile(args: argparse.Namespace, ans, size: int, evict: Evictor) -> list[dict]:
    """Each bank's ``IVFSearch.topk`` time and recall@K at each nprobe."""
    import faiss
    import torch

    from contrastext.negatives.search import ExactSearch, default_nprobe

    banks = {"u": ans.bank_u.bank, "v": ans.bank_v.bank}
    searches = {"u": ans.search_u, "v": ans.search_v}
    unchanged = torch.empty(0, dtype=torch.long)
    generator = torch.Generator().manual_seed(args.seed)
    build_s = {}
    faiss.omp_set_num_threads(os.cpu_count() or 1)  # the builds are not what is timed: every core
    for side, bank in banks.items():  # build the kept index once
        rows = batch_rows(size, args.batch_size, generator)
        started = time.perf_counter()
        searches[side].topk(bank[rows], bank, args.k, exclude=rows, changed=None)
        build_s[side] = time.perf_counter() - started
    faiss.omp_set_num_threads(args.threads)
    recall_rows = [batch_rows(size, args.batch_size, generator) for _ in range(args.recall_queries // args.batch_size)]
    exact = {side: [ExactSearch().topk(bank[rows], bank, args.k, exclude=rows)[1] for rows in recall_rows]
             for side, bank in banks.items()}  # fmt: skip
    results = []
    for nprobe in args.nprobes:
        line = {"size": size, "nlist": searches["u"].index.nlist, "nprobe": nprobe, "build_s": build_s}
        for side, bank in banks.items():
            search = searches[side]
            search.index.nprobe = min(nprobe, search.index.nlist)

            def call(search=search, bank=bank):
                rows = batch_rows(size, args.batch_size, generator)
                return search.topk(bank[rows], bank, args.k, exclude=rows, changed=unchanged)

            line[f"{side}_ms"], _ = timed(call, evict, args.steps, args.warmup)
            found = [search.topk(bank[rows], bank, args.k, exclude=rows, changed=unchanged)[1] for rows in recall_rows]
            line[f"{side}_recall"] = statistics.fmean(
                reclaim_overhead.recall_at_k(approximate, reference)
                for approximate, reference in zip(found, exact[side], strict=True)
            )
        results.append(line)
    for search in searches.values():  # back to the method's own nprobe
        search.index.nprobe = min(search.nprobe or default_nprobe(search.index.nlist), search.index.nlist)
    return results


def objective_profile(args: argparse.Namespace, ans, size: int, evict: Evictor) -> dict:
    """The ANS loss, its backward and the bank updates of one batch, its nearest rows fixed; the top operators."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    generator = torch.Generator().manual_seed(args.seed + 1)
    rows = batch_rows(size, args.batch_size, generator)
    u0, v0 = ans.bank_u.bank[rows].clone(), ans.bank_v.bank[rows].clone()
    near_u, near_v = ans.nearest_negatives(u0, v0, rows)
    ans.nearest_negatives = lambda u, v, indices: (near_u, near_v)  # no search from here on
    parts: dict[str, list[float]] = {"forward": [], "backward": [], "update": []}

    def step(record: bool) -> None:
        u = (u0 + 0.01 * torch.randn(u0.shape, generator=generator)).requires_grad_()
        v = (v0 + 0.01 * torch.randn(v0.shape, generator=generator)).requires_grad_()
        ans.zero_grad(set_to_none=True)
        evict()
        started = time.perf_counter()
        loss = ans(u, v, rows)
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        ans.update(rows, u.detach(), v.detach())
        done = time.perf_counter()
        if record:
            for name, seconds in zip(parts, (forward - started, backward - forward, done - backward), strict=True):
                parts[name].append(1000 * seconds)

    for index in range(args.warmup + args.steps):
        step(record=index >= args.warmup)
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(args.steps):
            step(record=False)
    operators = sorted(profiler.key_averages(), key=lambda event: event.self_cpu_time_total, reverse=True)
    total_us = sum(event.self_cpu_time_total for event in profiler.key_averages())
    result = {name: statistics.median(times) for name, times in parts.items()}
    result.update(
        size=size,
        distinct_u=int(torch.unique(near_u).numel()),
        distinct_v=int(torch.unique(near_v).numel()),
        operators=[(event.key, event.self_cpu_time_total / 1000 / args.steps, event.self_cpu_time_total / total_us)
                   for event in operators[:TOP_OPERATORS]],  # fmt: skip
    )
    return result


def measure(args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    import faiss
    import torch

    setup = overhead_args(args)
    setup.features = reclaim_overhead.encode_features(setup)  # every core, once (cached)
    _, task, _ = reclaim_overhead.training_rows(setup)
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    evict = Evictor()
    objectives, searches = [], []
    for size in args.bank_sizes:
        method, *_ = reclaim_overhead.build_row(setup, "top-K ivf", size, task, torch.device("cpu"), total_steps=1)
        searches += search_profile(args, method.ans, size, evict)
        objectives.append(objective_profile(args, method.ans, size, evict))
        print(f"  {size:,} rows done", file=sys.stderr, flush=True)
        del method
    return objectives, searches


def render(
    args: argparse.Namespace, load_before: tuple[float, ...], objectives: list[dict], searches: list[dict]
) -> str:
    import faiss
    import torch

    begin, end = markdown_block.markers(SCRIPT)
    lines = [begin, *common.run_conditions(
        SCRIPT, args.argv, "cpu", load_before,
        f"torch {torch.__version__}, faiss {faiss.__version__}; torch and faiss threads = {args.threads}",
        [f"the `reclaim` recipe's ANS (batch {args.batch_size}, K = {args.k}, critic width 64, `half_sum`) on the "
         "banks of `bench/reclaim_overhead.py`; median of "
         f"{args.steps} calls after {args.warmup}, a {EVICT_BYTES >> 20} MiB buffer written before each"],
    ), "", "### The objective, its nearest rows fixed (no search): ms per step", "",  # fmt: skip
        "| bank rows | distinct rows u / v | loss forward | backward | bank updates | total |",
        "|---:|---:|---:|---:|---:|---:|"]
    for line in objectives:
        total = line["forward"] + line["backward"] + line["update"]
        lines.append(f"| {line['size']:,} | {line['distinct_u']:,} / {line['distinct_v']:,} | {line['forward']:.1f} | "
                     f"{line['backward']:.1f} | {line['update']:.1f} | {total:.1f} |")  # fmt: skip
    for line in objectives:
        lines += ["", f"Operators of the objective by self CPU time, {line['size']:,} bank rows (torch.profiler, "
                  f"{args.steps} steps):", "", "| operator | ms per step | share |", "|---|---:|---:|"]  # fmt: skip
        lines += [f"| `{name}` | {ms:.2f} | {share:.0%} |" for name, ms, share in line["operators"]]
    lines += ["", f"### One batch's search ({args.batch_size} queries, K = {args.k}) on the kept IVF index", "",
              "| bank rows | nlist | nprobe | u bank ms | v bank ms | recall@K u | recall@K v |",
              "|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for line in searches:
        lines.append(f"| {line['size']:,} | {line['nlist']:,} | {line['nprobe']} | {line['u_ms']:.1f} | "
                     f"{line['v_ms']:.1f} | {line['u_recall']:.3f} | {line['v_recall']:.3f} |")  # fmt: skip
    builds = {line["size"]: line["build_s"] for line in searches}
    lines += ["", "Index builds (k-means and adding every row, once per bank, on every core): " + "; ".join(
        f"{size:,} rows {build['u']:.1f} s (u) and {build['v']:.1f} s (v)" for size, build in builds.items()) + ".",
        "", end, ""]  # fmt: skip
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bank-sizes", type=common.int_list(minimum=2),
                        default=[reclaim_overhead.SST2_ROWS, 1_000_000])  # fmt: skip
    parser.add_argument("--nprobes", type=common.int_list(), default=[16, 24, 32, 48, 64, 128])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch and faiss threads in the timed calls")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--recall-queries", type=int, default=512)
    parser.add_argument("--data-root", type=Path, default=None, help="default: $CONTRASTEXT_DATA or ../shared/data")
    parser.add_argument("--cache-dir", type=Path, default=None, help="reclaim_overhead's feature cache (its default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="smoke run: 300 sentences, banks of 12,000 rows")
    args = parser.parse_args(argv)
    args.section_suffix = ""
    if args.quick:
        args.bank_sizes, args.nprobes, args.steps, args.warmup = [12_000], [8, 16], 2, 1
        args.k, args.batch_size, args.recall_queries = 10, 8, 16
    if args.data_root is None:
        args.data_root = common.default_data_root()
    if args.cache_dir is None:
        args.cache_dir = reclaim_overhead.parse_args([]).cache_dir
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    load_before = os.getloadavg()
    objectives, searches = measure(args)
    common.publish_report(render(args, load_before, objectives, searches), args, SCRIPT, HEADING)
    return 0


if __name__ == "__main__":
    sys.exit(main())
