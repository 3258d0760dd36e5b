"""Benchmark: our InfoNCE / SupCon against sentence-transformers and pytorch-metric-learning, and top-K search.

Usage::

    python bench/objectives.py [--batch-sizes 64,256,1024,4096] [--dim 384] [--repeats 5] [--threads 1]
                               [--bank-sizes 10000,100000,1000000] [--k 100] [--queries 64]
                               [--device cpu] [--output BENCHMARKS.md] [--section-suffix TEXT] [--quick]

Part 1, losses (forward + backward on embeddings, float32, same inputs for every implementation):

- ``InfoNCE(τ=0.05)(a, p)`` vs sentence-transformers ``MultipleNegativesRankingLoss(scale=1/τ)
  .compute_loss_from_embeddings([a, p])`` (its own public path from embeddings; ``model=None``) and
  pytorch-metric-learning ``NTXentLoss(τ)(a, arange(B), ref_emb=p, ref_labels=arange(B))``;
- the same with one hard negative per anchor (SimCSE supervised): ``InfoNCE(a, p, n)`` vs MNRL on
  ``[a, p, n]`` and NTXent with ``ref_emb=cat(p, n)``, ``ref_labels=arange(2B)``;
- ``SupCon(τ=0.1)(z, y)`` vs PML ``SupConLoss(τ)(z, y)``, labels from 10 classes (every class present
  when B ≥ 10, so the batch has positive and negative pairs).

PML's NTXent needs B × B(B−1) floats (B³ memory), so it runs only up to ``--ntxent-max-batch`` (256).

Time: median of ``--repeats`` runs after one warm-up; the implementations of a case run round-robin
(ours, peer, peer, ours, …) so a load spike on a shared machine hits all of them alike.
``--threads`` (default 1) fixes ``torch.set_num_threads`` and faiss's OpenMP threads and is printed; on a
shared 2-core machine 2 threads stall at OpenMP barriers (single runs 100+ ms late), so 1 is the default.

Peak memory: the largest amount of memory allocated during one forward + backward above what was live
before it (inputs excluded; the input gradients, the same for every implementation, included). On CPU it
is read from the PyTorch profiler (``profile_memory=True``): every CPU allocation and free made by the
PyTorch allocator is an event with a signed byte count (read from ``prof.profiler.kineto_results``, an
undocumented attribute); the running sum in time order peaks at the answer. This counts tensors exactly and deterministically (no allocator caching, no RSS noise) but not
memory that libraries allocate outside PyTorch (faiss's index, see part 2). On CUDA:
``torch.cuda.max_memory_allocated`` minus the memory allocated before, after ``reset_peak_memory_stats``.

Part 2, top-K search (no gradient): ``--queries`` query rows against a bank of N rows of width
``--dim``, K = ``--k``, cosine similarity: ``ExactSearch`` (chunked matmul with a running top-K merge,
normalises the bank chunk by chunk at every call), ``FaissSearch`` (builds an ``IndexFlatIP`` over the
normalised bank at every call, as the class does), the naive ``torch.topk(q @ bank.T, K)`` on a bank
normalised once beforehand (its best case), and the same naive search normalising both sides at every call
(what ExactSearch does, so the fair comparison for it). The faiss row's memory adds the index's own copy of the
bank (N·d·4 bytes), which the profiler cannot see.

The report (markdown) goes to stdout and, with ``--output``, replaces the block between the
``<!-- begin bench/objectives.py -->`` / ``<!-- end bench/objectives.py -->`` markers of that file (the
block is appended when the markers are missing), leaving the rest of the file as it is; ``--section-suffix
TEXT`` appends TEXT to both markers and to the section title (``bench/markdown_block.py``), so runs under other
conditions (``--device cuda``) keep blocks of their own.
The exit status is 1 when a loss differs from a peer by more than ``--tolerance``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
import common  # noqa: E402
import markdown_block  # noqa: E402
from common import MIB, synchronize  # noqa: E402

SCRIPT = "objectives.py"
SECTION = "## Objectives and top-K search"
BEGIN_MARKER, END_MARKER = markdown_block.markers(SCRIPT)  # --section-suffix appends to them

Inputs = dict[str, Tensor]
LossFn = Callable[[Inputs], Tensor]


# ----------------------------------------------------------------------------------------------- measuring


def clear_grads(inputs: Inputs) -> None:
    for tensor in inputs.values():
        tensor.grad = None


def peaks_from_profile(prof: profile, prefix: str) -> dict[str, int]:
    """For each ``record_function(prefix + name)`` range: the peak of the running sum of the profiler's CPU
    allocation events ("[memory]", signed byte counts) inside that range, starting from 0."""
    events = prof.profiler.kineto_results.events()
    ranges = {e.name()[len(prefix) :]: (e.start_ns(), e.end_ns()) for e in events if e.name().startswith(prefix)}
    allocations = sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns())
    peaks = {}
    for name, (start, end) in ranges.items():
        live = peak = 0
        for event in allocations:
            if start <= event.start_ns() <= end:
                live += event.nbytes()
                peak = max(peak, live)
        peaks[name] = peak
    return peaks


def peak_memory_each(runs: dict[str, Callable[[], object]], device: torch.device) -> dict[str, int]:
    """Peak bytes allocated by each run above what was allocated before it (see the module docstring).

    On CPU all runs share one profiler session (starting one costs a fraction of a second), each inside
    its own ``record_function`` range; a run must free what it allocates, as a forward+backward does.
    """
    gc.collect()
    if device.type == "cuda":
        peaks = {}
        for name, run in runs.items():
            synchronize(device)
            before = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            run()
            synchronize(device)
            peaks[name] = torch.cuda.max_memory_allocated(device) - before
        return peaks
    prefix = "bench/objectives.py::"
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for name, run in runs.items():
            with record_function(prefix + name):
                run()
    return peaks_from_profile(prof, prefix)


def peak_memory_bytes(run: Callable[[], object], device: torch.device) -> int:
    """Peak bytes allocated by ``run()`` above what was allocated before it."""
    return peak_memory_each({"run": run}, device)["run"]


# --------------------------------------------------------------------------------------------------- losses


@dataclass
class LossCase:
    """One objective: our implementation, the peers computing the same number, and its inputs."""

    objective: str
    ours: LossFn
    peers: dict[str, LossFn]
    make_inputs: Callable[[int, int, torch.Generator, torch.device], Inputs]
    peer_max_batch: dict[str, int] = field(default_factory=dict)  # peers skipped above this batch size


@dataclass
class LossRow:
    objective: str
    batch: int
    peer: str
    ours_ms: float
    peer_ms: float | None  # None: the peer was skipped at this batch size
    ours_mib: float
    peer_mib: float | None
    abs_diff: float | None


def leaf(x: Tensor) -> Tensor:
    return x.detach().clone().requires_grad_(True)


def pair_inputs(batch: int, dim: int, gen: torch.Generator, device: torch.device) -> Inputs:
    anchors = torch.randn(batch, dim, generator=gen)
    positives = anchors + 0.5 * torch.randn(batch, dim, generator=gen)  # a noisy twin, like a dropout view
    return {"a": leaf(anchors.to(device)), "p": leaf(positives.to(device))}


def triplet_inputs(batch: int, dim: int, gen: torch.Generator, device: torch.device) -> Inputs:
    inputs = pair_inputs(batch, dim, gen, device)
    inputs["n"] = leaf(torch.randn(batch, dim, generator=gen).to(device))
    return inputs


def labelled_inputs(batch: int, dim: int, gen: torch.Generator, device: torch.device) -> Inputs:
    labels = (torch.arange(batch) % 10)[torch.randperm(batch, generator=gen)]
    return {"z": leaf(torch.randn(batch, dim, generator=gen).to(device)), "y": labels.to(device)}


def loss_cases(ntxent_max_batch: int) -> list[LossCase]:
    """The objectives benchmarked, each with the peer calls that compute the same loss (checked per run).

    PML's ``NTXentLoss`` builds a (positive pairs × negative pairs) matrix, B × B(B−1) floats (several
    copies) for B anchors — 273 MiB at B = 256, ~17 GiB at 1024, ~1 TiB at 4096 — so it only runs up to
    ``ntxent_max_batch``.
    """
    from pytorch_metric_learning.losses import NTXentLoss, SupConLoss
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from contrastext.objectives import InfoNCE, SupCon

    infonce, mnrl, ntxent = InfoNCE(temperature=0.05), MultipleNegativesRankingLoss(None, scale=20.0), NTXentLoss(0.05)
    supcon, pml_supcon = SupCon(temperature=0.1), SupConLoss(temperature=0.1)

    def ntxent_against(x: Inputs, reference: Tensor) -> Tensor:
        labels = torch.arange(reference.shape[0], device=reference.device)
        return ntxent(x["a"], labels[: x["a"].shape[0]], ref_emb=reference, ref_labels=labels)

    return [
        LossCase(
            "InfoNCE",
            ours=lambda x: infonce(x["a"], x["p"]),
            peers={
                "ST MNRL": lambda x: mnrl.compute_loss_from_embeddings([x["a"], x["p"]], None),
                "PML NTXent": lambda x: ntxent_against(x, x["p"]),
            },
            make_inputs=pair_inputs,
            peer_max_batch={"PML NTXent": ntxent_max_batch},
        ),
        LossCase(
            "InfoNCE + 1 hard neg.",
            ours=lambda x: infonce(x["a"], x["p"], x["n"]),
            peers={
                "ST MNRL": lambda x: mnrl.compute_loss_from_embeddings([x["a"], x["p"], x["n"]], None),
                "PML NTXent": lambda x: ntxent_against(x, torch.cat([x["p"], x["n"]])),
            },
            make_inputs=triplet_inputs,
            peer_max_batch={"PML NTXent": ntxent_max_batch},
        ),
        LossCase(
            "SupCon",
            ours=lambda x: supcon(x["z"], x["y"]),
            peers={"PML SupCon": lambda x: pml_supcon(x["z"], x["y"])},
            make_inputs=labelled_inputs,
        ),
    ]


def forward_backward(fn: LossFn, inputs: Inputs) -> Callable[[], None]:
    def run() -> None:
        fn(inputs).backward()
        clear_grads(inputs)  # after, so a profiled run starts with no gradient allocated before it

    return run


def bench_losses(
    batch_sizes: list[int], dim: int, repeats: int, device: torch.device, ntxent_max_batch: int
) -> list[LossRow]:
    rows = []
    for case in loss_cases(ntxent_max_batch):
        for batch in batch_sizes:
            inputs = case.make_inputs(batch, dim, torch.Generator().manual_seed(batch), device)
            peers = {name: fn for name, fn in case.peers.items() if batch <= case.peer_max_batch.get(name, batch)}
            fns = {"ours": case.ours, **peers}
            runs = {name: forward_backward(fn, inputs) for name, fn in fns.items()}
            seconds = common.median_times(runs, repeats, device, warmup=1)
            mib = {name: peak / MIB for name, peak in peak_memory_each(runs, device).items()}
            with torch.no_grad():
                values = {name: float(fn(inputs)) for name, fn in fns.items()}
            for peer in case.peers:
                ran = peer in peers
                rows.append(
                    LossRow(
                        case.objective, batch, peer, 1e3 * seconds["ours"], 1e3 * seconds[peer] if ran else None,
                        mib["ours"], mib[peer] if ran else None, abs(values["ours"] - values[peer]) if ran else None,
                    )
                )
                print(f"  {case.objective} B={batch} vs {peer}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


# --------------------------------------------------------------------------------------------------- top-K


@dataclass
class SearchRow:
    bank_rows: int
    method: str
    ms: float
    mib: float
    score_diff: float
    same_indices: float


def search_runs(q: Tensor, bank: Tensor, k: int, chunk_size: int) -> dict[str, Callable[[], tuple[Tensor, Tensor]]]:
    """The three top-K searches of ``q`` in ``bank`` (both rows already L2-normalised), by name."""
    from contrastext.negatives.search import ExactSearch, FaissSearch

    exact, faiss_search = ExactSearch(chunk_size=chunk_size), FaissSearch()
    return {
        "naive torch.topk(q @ bank.T)": lambda: torch.topk(q @ bank.T, k, dim=1),
        "naive, normalising per call": lambda: torch.topk(F.normalize(q, dim=1) @ F.normalize(bank, dim=1).T, k, dim=1),
        f"ExactSearch(chunk_size={chunk_size})": lambda: exact.topk(q, bank, k),
        "FaissSearch (IndexFlatIP)": lambda: faiss_search.topk(q, bank, k),
    }


def bench_topk(
    bank_sizes: list[int], dim: int, k: int, queries: int, repeats: int, chunk_size: int, device: torch.device
) -> list[SearchRow]:
    rows = []
    for size in bank_sizes:
        gen = torch.Generator().manual_seed(size)
        bank = F.normalize(torch.randn(size, dim, generator=gen), dim=1).to(device)
        q = F.normalize(torch.randn(queries, dim, generator=gen), dim=1).to(device)
        searches = search_runs(q, bank, k, chunk_size)
        with torch.no_grad():
            seconds = common.median_times(searches, repeats, device, warmup=1)
            results = {name: search() for name, search in searches.items()}
            mib = {name: peak / MIB for name, peak in peak_memory_each(searches, device).items()}
        mib["FaissSearch (IndexFlatIP)"] += size * dim * 4 / MIB  # faiss's own copy of the bank
        reference_scores, reference_indices = results["naive torch.topk(q @ bank.T)"]
        for name, (scores, indices) in results.items():
            same = (indices.cpu() == reference_indices.cpu()).float().mean().item()
            diff = (scores.cpu() - reference_scores.cpu()).abs().max().item()
            rows.append(SearchRow(size, name, 1e3 * seconds[name], mib[name], diff, same))
            print(f"  top-{k} N={size}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


# --------------------------------------------------------------------------------------------------- report


def loss_table(rows: list[LossRow]) -> list[str]:
    lines = [
        "| objective | batch | peer | ours ms | peer ms | time ours/peer | ours MiB | peer MiB | memory ours/peer "
        "| abs loss diff |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.peer_ms is None or r.peer_mib is None or r.abs_diff is None:
            lines.append(
                f"| {r.objective} | {r.batch} | {r.peer} | {r.ours_ms:.2f} | skipped | – | {r.ours_mib:.3g} "
                "| skipped | – | – |"
            )
            continue
        memory_ratio = r.ours_mib / r.peer_mib if r.peer_mib > 0 else float("nan")
        lines.append(
            f"| {r.objective} | {r.batch} | {r.peer} | {r.ours_ms:.2f} | {r.peer_ms:.2f} | {r.ours_ms / r.peer_ms:.2f} "
            f"| {r.ours_mib:.3g} | {r.peer_mib:.3g} | {memory_ratio:.2f} | {r.abs_diff:.1e} |"
        )
    return lines


def search_table(rows: list[SearchRow]) -> list[str]:
    naive = {r.bank_rows: r.ms for r in rows if r.method.startswith("naive torch.topk")}
    lines = [
        "| bank rows | method | median ms | time / naive | peak MiB | max abs score diff vs naive "
        "| same indices as naive |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.bank_rows:,} | {r.method} | {r.ms:,.1f} | {r.ms / naive[r.bank_rows]:.2f} | {r.mib:,.1f} "
            f"| {r.score_diff:.1e} | {100 * r.same_indices:.2f}% |"
        )
    return lines


def render(
    args: argparse.Namespace, device: torch.device, load_before: tuple[float, ...],
    loss_rows: list[LossRow], search_rows: list[SearchRow],
) -> str:
    import faiss
    import pytorch_metric_learning
    import sentence_transformers

    versions = (
        f"torch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()} (faiss OpenMP threads "
        f"set to the same); sentence-transformers {sentence_transformers.__version__}, pytorch-metric-learning "
        f"{pytorch_metric_learning.__version__}, faiss {faiss.__version__}"
    )
    measured = (
        f"float32, width d = {args.dim}; time = median of {args.repeats} forward+backward runs after a warm-up; "
        f"peak = extra memory allocated during one forward+backward "
        f"({'torch.cuda.max_memory_allocated' if device.type == 'cuda' else 'PyTorch profiler allocation events'})"
    )
    conditions = common.run_conditions(
        SCRIPT, args.argv, str(device), load_before, versions, [measured],
        load_note="(the machine is shared; the implementations of a case run round-robin)",
    )
    begin, end = markdown_block.markers(SCRIPT, args.section_suffix)
    lines = [
        begin,
        *conditions,
        "",
        "### Losses: forward + backward (ours vs peers, same embeddings)",
        "",
        *loss_table(loss_rows),
        "",
        f"PML NTXent is skipped above batch {args.ntxent_max_batch}: it builds a (positive pairs × negative pairs) "
        "matrix of B × B(B−1) floats (273 MiB at B = 256, ~17 GiB at 1024, ~1 TiB at 4096).",
        "",
        f"### Top-{args.k} search: {args.queries} queries, width {args.dim}, cosine",
        "",
        *search_table(search_rows),
        "",
        "FaissSearch's memory includes the index's own copy of the bank (N·d·4 bytes, outside PyTorch).",
        end,
    ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------------ CLI


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", type=common.int_list(), default=[64, 256, 1024, 4096])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per loss case (median reported)")
    parser.add_argument("--bank-sizes", type=common.int_list(), default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--search-repeats", type=int, default=3)
    parser.add_argument("--chunk-size", type=int, default=65536, help="ExactSearch chunk size")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch and faiss threads (1: stable timings on a shared machine)"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--ntxent-max-batch", type=int, default=256, help="largest batch for PML NTXent (its memory grows as B^3)"
    )
    parser.add_argument("--tolerance", type=float, default=1e-4, help="max abs loss difference to a peer")
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run (seconds)")
    markdown_block.add_suffix_option(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_sizes, args.dim, args.repeats = [8, 32], 32, 1
        args.bank_sizes, args.k, args.queries, args.search_repeats, args.chunk_size = [300, 1000], 10, 8, 1, 256
        args.ntxent_max_batch = 16  # so the quick run also takes the "skipped" path
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import faiss

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"torch.get_num_threads() = {torch.get_num_threads()}, device = {device}", file=sys.stderr)
    load_before = os.getloadavg()
    loss_rows = bench_losses(args.batch_sizes, args.dim, args.repeats, device, args.ntxent_max_batch)
    search_rows = bench_topk(
        args.bank_sizes, args.dim, args.k, args.queries, args.search_repeats, args.chunk_size, device
    )
    report = render(args, device, load_before, loss_rows, search_rows)
    common.publish_report(report, args, SCRIPT, SECTION)
    worst = max(row.abs_diff for row in loss_rows if row.abs_diff is not None)
    if worst > args.tolerance:
        print(f"loss values disagree with a peer: max abs diff {worst:.3e} > {args.tolerance}", file=sys.stderr)
        return 1
    print(f"losses agree with the peers: max abs diff {worst:.1e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
