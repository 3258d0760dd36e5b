"""Benchmark: what online hard negatives from a kept bank (``negatives.source: bank``) add to an ``mnrl`` step.

The user's line is ``contrastext train mnrl --set negatives.source=bank negatives.k=8 ...``; this script measures
its time per training step and its peak resident memory against ``mnrl`` with in-batch negatives only, for the
refreshes and searches the ``negatives:`` section offers, at two bank sizes.

Usage::

    python bench/online_negatives.py [--bank-sizes train,1000000] [--arms in-batch,momentum-exact,...]
                                     [--steps 20] [--warmup 3] [--rounds 2] [--threads 1] [--build-threads N]
                                     [--k 8] [--batch-size 32] [--max-length L] [--pairs N] [--model M]
                                     [--reencode-every 1000] [--jitter 0.25] [--recall-batches 8]
                                     [--data-root ../shared/data] [--cache-dir DIR] [--interleave] [--nprobe N]
                                     [--output BENCHMARKS.md] [--section-suffix TEXT] [--quick]

**Data.** The (anchor, positive) training pairs of ``contrastext nli-to-beir`` (the retrieval experiment's
data, built in memory with its defaults: SNLI dev + test premises and the hypotheses they entail, the seeded
evaluation queries' pairs left out): 4,258 pairs, 4,183 distinct positives; ``--pairs N`` keeps the first N. The bank at the training set's
size (``train`` in ``--bank-sizes``) holds one row per distinct positive, as the run builds it. A larger size N
is the same run with ``negatives.corpus``: a ``.txt`` file of N − n distinct lines (the positives with a serial
number), so that the bank has N rows; these corpus rows are *not encoded* (a million texts take tens of minutes on
one thread): row n + i holds the embedding of positive i mod n plus Gaussian jitter (``--jitter`` × each dimension's
standard deviation, seeded), the width, scale and neighbourhood structure of real embeddings. The training
rows' own bank rows hold their real embeddings: all-MiniLM-L6-v2's (eval mode, as ``OnlineNegatives.fill``
computes them), encoded once by the parent with every core and cached in ``--cache-dir``.

**Arms** (each ``mnrl`` recipe settings with ``train.batch_size`` = ``--batch-size``, ``eval.tasks=[]``):

- ``in-batch``: ``negatives.source=none``, the baseline (the same at every bank size: it runs once a round);
- ``momentum-exact``: ``source=bank``, ``k``, ``refresh=momentum`` (the step's positive rows by Eq. 7 after
  the optimiser step), ``search=exact``;
- ``reencode-exact``: ``refresh=reencode``: no update per step; every ``reencode_every`` steps every bank text
  is encoded again. The child times one such re-encoding at the end, through the real path (the step counter
  set so that the next ``after_step`` is due), and keeps the line the run logs for it; "amortised ms/step" is
  its seconds / ``reencode_every``. Not run above the training set's size (the corpus would be encoded): its row
  there gives the estimate from the measured texts per second;
- ``momentum-faiss``: ``search=faiss`` (a flat faiss index built at every call: exact); not run above
  ``--faiss-max-rows`` (at 1M rows one such search takes ~9 s, see the objectives block);
- ``momentum-ivf``: ``search=ivf``, the IVF index kept across steps and updated in place at the rows each
  momentum update wrote. Below ``IVFSearch``'s ``exact_below`` (10,000 rows) it answers with the exact search, so
  it is not run there. Its index is built before the timed steps (``--build-threads``, default 1: faiss's
  OpenBLAS threads spin-wait on a busy machine; "one-off s").

**What a step is.** The run is built from the recipe through the library (``load_config(recipe_path("mnrl"),
...)``, ``contrastext.runs.mnrl.build``: the data, ``IndexedExample`` rows, the ``OnlineNegatives`` bank, the
``SimCSE`` method with InfoNCE at scale 20), with the optimiser and schedule of the config (AdamW, linear, warmup
10 %, clipping 1.0); then each timed step is what the trainer does in one optimiser step: ``collate``
(tokenisation) → forward (one encoder pass over anchors and positives, the bank search, the loss with the k bank
rows appended to each anchor's candidates) → backward → clip → AdamW → schedule → ``zero_grad`` → ``after_step``
(the momentum update of the bank). float32 on the CPU; Accelerate's wrappers, logging and checkpoints are not
timed. Every arm trains on the same seeded sequence of batches (``--batch-size`` distinct rows each), so steps
pair batch by batch.

**Recall@k.** Where the search is not the exact one (faiss, ivf), after the timed steps and for
``--recall-batches`` more batches (not trained on), the arm's search (the kept index with its in-place updates)
gives each anchor's top-k bank rows, compared with ``ExactSearch`` on the same anchors and bank: |ours ∩ exact| /
k averaged; after each batch the bank takes a momentum update as a step would.

**Measuring.** Each (arm, bank size) runs in a child process of its own (``child_process.run_worker``) with
``--threads`` threads; the cells run round-robin for ``--rounds`` rounds, the order reversed every other round.
Time: the median step after ``--warmup`` steps; "× baseline": the median over steps of (arm's step / baseline's
step on the same batch), median over rounds. Memory: the child resets its peak resident set
(``/proc/self/clear_refs``) after the warm-up and reads ``VmHWM`` after the timed steps: everything resident
counts (model, AdamW state, the bank, the layout tables, the corpus's texts, faiss's index, activations). "+ MiB"
is the difference to the same round's baseline, "+ B per bank row" that difference in bytes over the bank's rows
(the bank itself is 4·dim = 1,536 B a row at 384 dims). Two processes doing the same work can differ by more
than a bank's cost (a single round of 2026-11-27 put every bank arm *below* in-batch), so ``--interleave`` pairs in
time instead, as ``bench/reclaim_overhead.py --interleave`` does: each arm's child also builds the in-batch run (a
twin, same seed, same batches) and steps both on every batch, the twin first on even steps and second on odd ones;
"× baseline" is then the median of arm step / twin step within that process, median over rounds, and "+ MiB" is not
given (the peak holds both runs: a run without ``--interleave`` measures memory).

The report goes to stdout and, with ``--output``, replaces the block between ``<!-- begin
bench/online_negatives.py -->`` and ``<!-- end bench/online_negatives.py -->`` of that file.
``--quick`` is a smoke run (tiny sizes, one round): its numbers mean nothing.

**Duration.** The full run (defaults: 2 rounds of 6 cells, 20 steps each) takes an estimated 9–11 minutes on a
quiet 2-core CPU (~0.5 s an in-batch step on one thread, ~1.4 s with the exact search over 1M rows, ~1.5 minutes
to build the 1M-row IVF index on one thread, as bench/reclaim_overhead.py measured it, ~15 s to encode the
training bank once); ``--rounds 1`` halves it.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
import child_process  # noqa: E402
import common  # noqa: E402
import markdown_block  # noqa: E402
from common import REPO, reset_peak_rss, status_mib  # noqa: E402

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SCRIPT = "online_negatives.py"
BEGIN_MARKER, END_MARKER = markdown_block.markers(SCRIPT)  # --section-suffix appends to them
SECTION = "## Online hard negatives for mnrl: cost of a kept bank"
TRAIN = 0
"""``--bank-sizes`` entry ``train``: the bank the training set makes (one row per distinct positive)."""
NLI_TRIPLETS = Path("nli") / "snli_devtest_for_simcse.csv"  # the retrieval experiment's source (docs/RETRIEVAL.md)

# arm -> negatives.* overrides (None: source none, the baseline)
ARMS: dict[str, dict[str, str] | None] = {
    "in-batch": None,
    "momentum-exact": {"refresh": "momentum", "search": "exact"},
    "reencode-exact": {"refresh": "reencode", "search": "exact"},
    "momentum-faiss": {"refresh": "momentum", "search": "faiss"},
    "momentum-ivf": {"refresh": "momentum", "search": "ivf"},
}
BASELINE = "in-batch"
ARM_WORDS = {
    "in-batch": "in-batch only (`source: none`)",
    "momentum-exact": "bank, momentum, exact",
    "reencode-exact": "bank, re-encode, exact",
    "momentum-faiss": "bank, momentum, faiss (flat)",
    "momentum-ivf": "bank, momentum, ivf (kept)",
}


# ------------------------------------------------------------------------------------------------- data


def training_pairs(data_root: Path, limit: int | None) -> list[tuple[str, str]]:
    """The retrieval experiment's (anchor, positive) training pairs (``contrastext nli-to-beir``'s, at its
    defaults), the first ``limit`` of them."""
    from contrastext.data.nli_retrieval import build_nli_retrieval

    source = data_root / NLI_TRIPLETS
    if not source.is_file():
        raise SystemExit(f"error: {source}: not found (give --data-root)")
    pairs = build_nli_retrieval(source)["pairs"]
    return pairs if limit is None else pairs[:limit]


def write_pairs(path: Path, pairs: list[tuple[str, str]]) -> str:
    """Write ``anchor,positive`` rows; return the file's sha256 (the caches' key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["anchor", "positive"])
        writer.writerows(pairs)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def corpus_lines(texts: list[str], count: int) -> list[str]:
    """``count`` distinct one-line texts: the bank's texts in turn, each with a serial number."""
    return [f"{' '.join(texts[i % len(texts)].split())} #{i}" for i in range(count)]


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text)


# ------------------------------------------------------------------------------------------ the run itself


def recipe_config(args: argparse.Namespace, arm: str, corpus: Path | None = None):
    """The ``mnrl`` recipe's config for ``arm`` on the pairs file (no evaluation), with ``corpus`` banked too."""
    from contrastext.runs.recipes import recipe_path
    from contrastext.training.config import load_config

    overrides = [
        f"data.path={args.pairs_file}",
        f"train.batch_size={args.batch_size}",
        "eval.tasks=[]",
        f"seed={args.seed}",
        *([f"model={args.model}"] if args.model is not None else []),
        *([f"data.max_length={args.max_length}"] if args.max_length is not None else []),
    ]
    settings = ARMS[arm]
    if settings is not None:
        overrides += ["negatives.source=bank", f"negatives.k={args.k}", f"negatives.reencode_every={args.reencode_every}",
                      *(f"negatives.{key}={value}" for key, value in settings.items())]
        if corpus is not None:
            overrides.append(f"negatives.corpus={corpus}")
        if settings.get("search") == "ivf" and args.nprobe is not None:
            overrides.append(f"negatives.search_nprobe={args.nprobe}")
    return load_config(recipe_path("mnrl"), overrides)


def build_run(args: argparse.Namespace, arm: str, corpus: Path | None = None):
    """The ``mnrl`` run's method and training rows, as ``contrastext train mnrl`` builds them."""
    from contrastext.runs.mnrl import MNRLArgs, build

    config = recipe_config(args, arm, corpus)
    bundle = build(config, config.method_args_as(MNRLArgs), args.data_root)
    return config, bundle.method, bundle.train_examples


def encode_bank(args: argparse.Namespace) -> Path:
    """The training-set bank's rows (every distinct positive, encoded by ``OnlineNegatives.fill`` with every core)
    and its texts; cached under the pairs' hash and the model's name."""
    import torch

    model = "recipe" if args.model is None else slug(args.model)
    path = Path(args.cache_dir) / f"online_negatives_bank_{args.pairs_hash}_{model}_len{args.max_length or 'recipe'}.pt"
    if path.exists():
        return path
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the run's own lines: stdout carries the report
            _, method, _ = build_run(args, "momentum-exact")
            seconds = method.negatives.fill(method.encode_texts)
    finally:
        torch.set_num_threads(threads)
    print(f"encoded the bank's {len(method.negatives.texts):,} texts in {seconds:.1f} s -> {path}", file=sys.stderr)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"rows": method.negatives.bank.bank.clone(), "texts": list(method.negatives.texts),
                "seconds": seconds}, path)
    return path


def corpus_file(args: argparse.Namespace, texts: list[str], size: int) -> Path:
    """The ``negatives.corpus`` file that makes the bank ``size`` rows (cached)."""
    path = Path(args.cache_dir) / f"online_negatives_corpus_{args.pairs_hash}_{size}.txt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(corpus_lines(texts, size - len(texts))) + "\n", encoding="utf-8")
    return path


def fill_bank(online, real, jitter: float, seed: int) -> None:
    """The bank's first rows from ``real`` (n, d), row n + i = real[i mod n] + seeded Gaussian jitter ×
    per-dimension std; the bank marked filled (the run's first fill is not run again)."""
    import torch

    bank = online.bank.bank
    n, size = real.size(0), bank.size(0)
    if size < n:
        raise ValueError(f"the bank has {size} rows, fewer than the {n} cached training rows")
    bank[:n] = real
    scale = jitter * real.std(dim=0)
    generator = torch.Generator().manual_seed(seed)
    for start in range(n, size, 65536):
        rows = torch.arange(start, min(start + 65536, size))
        bank[rows] = real[(rows - n) % n] + scale * torch.randn(rows.numel(), real.size(1), generator=generator)
    online.filled.fill_(True)


def batches(count: int, rows: int, batch_size: int, seed: int) -> list[list[int]]:
    """``count`` seeded batches of ``batch_size`` distinct row positions (the same in every arm)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return [torch.randperm(rows, generator=generator)[:batch_size].tolist() for _ in range(count)]


def train_step(method, examples, optimizer, scheduler, grad_clip) -> float:
    """One optimiser step as the trainer runs it; returns the loss."""
    import torch

    from contrastext.training.method import total_loss

    batch = method.collate(examples)
    loss = total_loss(method(batch), method.loss_weights)
    loss.backward()
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(method.parameters(), grad_clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    method.after_step()
    return float(loss.detach())


@contextlib.contextmanager
def thread_count(threads: int, restore: int):
    """torch's and faiss's threads set to ``threads`` inside, ``restore`` after."""
    import faiss
    import torch

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(restore)
        faiss.omp_set_num_threads(restore)


def kept_recall(method, online, examples, k: int) -> float:
    """|search's top-k ∩ exact top-k| / k over the anchors of ``examples`` batches (lists of rows); the bank takes a
    momentum update after each, as a step would."""
    import torch

    from contrastext.negatives.search import ExactSearch

    exact, hits, total = ExactSearch(), 0, 0
    method.eval()
    for chunk in examples:
        batch = method.collate(chunk)
        with torch.no_grad():
            anchors, positives = method.embed(batch)[:2]
        changed = online.bank.take_changed() if online.search.stateful else None
        _, found = online.search.topk(anchors, online.bank.bank, k, changed=changed)
        _, truth = exact.topk(anchors, online.bank.bank, k)
        hits += sum(len(set(a) & set(b)) for a, b in zip(found.tolist(), truth.tolist(), strict=True))
        total += truth.numel()
        online.update(batch["indices"], [positives])
    method.train()
    return hits / total


def worker(args: argparse.Namespace) -> int:
    """One (arm, bank size): build the run, fill the bank, warm up, time the steps; JSON into ``--result``."""
    import faiss
    import torch

    from contrastext.negatives.search import ExactSearch
    from contrastext.training.schedules import optimizer_from_config, scheduler_from_config

    arm, size = parse_cell(args.worker)
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    config, method, examples = build_run(args, arm, args.corpus_file if size != TRAIN else None)
    online = getattr(method, "negatives", None)
    result: dict = {"arm": arm, "size": size, "threads": torch.get_num_threads(), "pairs": len(examples)}
    if online is not None:
        cached = torch.load(args.bank_file)
        fill_bank(online, cached["rows"], args.jitter, args.seed)
        if size != TRAIN and len(online.bank) != size:
            raise SystemExit(f"error: the bank has {len(online.bank):,} rows, not {size:,} (corpus lines merged?)")
        result.update(bank_rows=len(online.bank), bytes_per_row=online.report()["bytes_per_row"],
                      train_rows=cached["rows"].size(0))
    train = config.train
    optimizer = optimizer_from_config(method, train)
    total = args.warmup + args.steps
    reencode = online is not None and online.refresh == "reencode"
    order = batches(total + 1 + args.recall_batches + 1, len(examples), args.batch_size, args.seed)
    rows = [[examples[i] for i in chunk] for chunk in order]
    scheduler = scheduler_from_config(optimizer, train, len(rows))
    method.train()
    method.on_train_start(len(rows))  # the bank is filled: nothing encoded here
    twin = interleaved_twin(args, order, len(examples)) if args.interleave and online is not None else None
    if online is not None and online.search.stateful:  # build the kept index now, timed apart from the steps
        batch = method.collate(rows[-1])
        with torch.no_grad(), thread_count(args.build_threads, args.threads):
            anchors, positives = method.embed(batch)[:2]
            started = time.perf_counter()
            online.candidates(anchors, positives, batch["indices"])
            result["build_s"] = time.perf_counter() - started
        index = online.search.index
        result.update(nlist=index.nlist if index is not None else None, nprobe=index.nprobe if index is not None else None,
                      builds_before=online.search.builds, retrain_after=online.search.retrain_after)
    step_s, losses, twin_s = [], [], []
    for step in range(total):
        if step == args.warmup:
            result["peak_reset"] = reset_peak_rss()
            result["rss_before_mib"] = status_mib("VmRSS")
        if twin is not None and step % 2 == 0:  # the twin first on even steps, second on odd ones
            twin_elapsed = twin(step)
        started = time.perf_counter()
        losses.append(train_step(method, rows[step], optimizer, scheduler, train.grad_clip))
        elapsed = time.perf_counter() - started
        if twin is not None and step % 2 == 1:
            twin_elapsed = twin(step)
        if step >= args.warmup:
            step_s.append(elapsed)
            if twin is not None:
                twin_s.append(twin_elapsed)
    result.update(step_s=step_s, final_loss=losses[-1], peak_mib=status_mib("VmHWM"))
    if twin is not None:
        result["baseline_step_s"] = twin_s
    if online is not None and online.search.stateful:
        result["builds_during_steps"] = online.search.builds - result.pop("builds_before")
        result["exact_fallbacks"] = online.search.exact_fallbacks
    if reencode:  # the real path: the next after_step is the reencode_every-th
        online.steps.fill_(online.reencode_every - 1)
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            started = time.perf_counter()
            train_step(method, rows[total], optimizer, scheduler, train.grad_clip)
            step_with = time.perf_counter() - started
        lines = [line for line in log.getvalue().splitlines() if "re-encoded" in line]
        result["reencode"] = {"seconds": online.encode_seconds[-1], "texts": len(online.texts),
                              "every": online.reencode_every, "step_s": step_with, "log": lines[-1] if lines else None,
                              "peak_mib": status_mib("VmHWM")}
    if online is not None and args.recall_batches and not isinstance(online.search, ExactSearch):
        result["recall"] = kept_recall(method, online, rows[total + 1 : total + 1 + args.recall_batches], online.k)
    Path(args.result).write_text(json.dumps(result))
    return 0


def interleaved_twin(args: argparse.Namespace, order: list[list[int]], rows: int):
    """``--interleave``: the in-batch run (the baseline's config, same seed) built in this process, stepped on the
    same batches; returns ``step(i) -> seconds`` of its optimiser step on batch ``i``."""
    import torch

    from contrastext.training.schedules import optimizer_from_config, scheduler_from_config

    torch.manual_seed(args.seed)
    config, method, examples = build_run(args, BASELINE)
    if len(examples) != rows:
        raise SystemExit(f"error: the twin has {len(examples)} training rows, the arm {rows}")
    batches_of = [[examples[i] for i in chunk] for chunk in order]
    optimizer = optimizer_from_config(method, config.train)
    scheduler = scheduler_from_config(optimizer, config.train, len(batches_of))
    method.train()
    method.on_train_start(len(batches_of))

    def step(index: int) -> float:
        started = time.perf_counter()
        train_step(method, batches_of[index], optimizer, scheduler, config.train.grad_clip)
        return time.perf_counter() - started

    return step


# ------------------------------------------------------------------------------------------------ parent


def cell_name(arm: str, size: int) -> str:
    return f"{arm}@{size}"


def parse_cell(name: str) -> tuple[str, int]:
    arm, _, size = name.partition("@")
    if arm not in ARMS:
        raise SystemExit(f"error: unknown arm {arm!r}")
    return arm, int(size)


def skip_reason(arm: str, size: int, train_rows: int, args: argparse.Namespace) -> str | None:
    """Why ``arm`` is not run at ``size`` (None: it runs); the re-encode estimate is added at render time."""
    from contrastext.negatives.search import IVFSearch

    rows = train_rows if size == TRAIN else size
    if arm == BASELINE and size != TRAIN:
        return "the baseline (no bank): its training-set row"
    if arm == "reencode-exact" and size != TRAIN:
        return "not run: each re-encoding would encode the whole corpus"
    if arm == "momentum-faiss" and rows > args.faiss_max_rows:
        return (f"not run: a flat faiss index of the whole bank is built at every search (> --faiss-max-rows "
                f"{args.faiss_max_rows:,}; ~9 s a search at 1M rows in the objectives block)")
    exact_below = IVFSearch().exact_below
    if arm == "momentum-ivf" and rows < exact_below:
        return f"= exact: IVFSearch answers a bank under {exact_below:,} rows with the exact search"
    return None


def measure(args: argparse.Namespace, cells: list[str], work: Path) -> dict[str, list[dict]]:
    worker_args = [
        "--pairs-file", str(args.pairs_file), "--bank-file", str(args.bank_file), "--steps", str(args.steps),
        "--warmup", str(args.warmup), "--k", str(args.k), "--batch-size", str(args.batch_size),
        "--seed", str(args.seed), "--jitter", str(args.jitter), "--recall-batches", str(args.recall_batches),
        "--reencode-every", str(args.reencode_every), "--build-threads", str(args.build_threads),
        *(["--nprobe", str(args.nprobe)] if args.nprobe is not None else []),
        "--data-root", str(args.data_root), "--cache-dir", str(args.cache_dir),
        *(["--model", args.model] if args.model is not None else []),
        *(["--max-length", str(args.max_length)] if args.max_length is not None else []),
        *(["--interleave"] if args.interleave else []),
    ]

    def run_arm(cell: str, round_index: int) -> dict:
        _, size = parse_cell(cell)
        extra = ["--corpus-file", str(args.corpus_files[size])] if size != TRAIN else []
        run = child_process.run_worker(__file__, cell, work / f"{cell.replace('@', '_')}-{round_index}.json",
                                       [*worker_args, *extra], args.threads, args.timeout)
        if run.get("timeout"):
            raise SystemExit(f"error: {cell} ran past --timeout {args.timeout:.0f} s")
        run["round"] = round_index
        return run

    return child_process.round_robin(cells, args.rounds, run_arm)


def paired_ratio(steps: list[float], baseline: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(steps, baseline, strict=True))


def summarise(results: dict[str, list[dict]]) -> dict[str, dict]:
    """Per cell: median ms/step, × baseline and + MiB against the same round's baseline, peak, and the extras."""
    base = {run["round"]: run for run in results.get(cell_name(BASELINE, TRAIN), [])}
    table = {}
    for cell, runs in results.items():
        line: dict = {
            "ms": statistics.median(1e3 * statistics.median(run["step_s"]) for run in runs),
            "peak": statistics.median(run["peak_mib"] for run in runs),
            "first": runs[0],
        }
        paired = [(run, base[run["round"]]) for run in runs if run["round"] in base]
        if all("baseline_step_s" in run for run in runs):  # --interleave: paired within each process
            line["ratio"] = statistics.median(paired_ratio(r["step_s"], r["baseline_step_s"]) for r in runs)
            line["round_ratios"] = [paired_ratio(r["step_s"], r["baseline_step_s"]) for r in runs]
        elif paired:
            line["ratio"] = statistics.median(paired_ratio(r["step_s"], b["step_s"]) for r, b in paired)
            line["extra"] = statistics.median(r["peak_mib"] - b["peak_mib"] for r, b in paired)
        if "build_s" in runs[0]:
            line["build_s"] = statistics.median(run["build_s"] for run in runs)
        if "recall" in runs[0]:
            line["recall"] = statistics.fmean(run["recall"] for run in runs)
        if "reencode" in runs[0]:
            line["reencode_s"] = statistics.median(run["reencode"]["seconds"] for run in runs)
        line["peak_reset"] = all(run.get("peak_reset", False) for run in runs)
        table[cell] = line
    return table


def reencode_estimate(table: dict[str, dict], size: int) -> str | None:
    """The re-encode cost at ``size`` rows from the training-set arm's texts per second."""
    line = table.get(cell_name("reencode-exact", TRAIN))
    if line is None:
        return None
    info = line["first"]["reencode"]
    rate = info["texts"] / line["reencode_s"]
    seconds = size / rate
    return (f"not run: one re-encoding of {size:,} texts ≈ {seconds:,.0f} s at the measured {rate:,.0f} texts/s, "
            f"{1e3 * seconds / info['every']:,.1f} ms/step amortised over reencode_every={info['every']:,}")


def render(args: argparse.Namespace, load_before, table: dict[str, dict], skipped: dict[str, str]) -> str:
    import faiss
    import torch

    train_rows = args.train_rows
    model = "all-MiniLM-L6-v2 (the recipe's)" if args.model is None else f"`{args.model}`"
    versions = f"torch {torch.__version__}, faiss {faiss.__version__}; torch and faiss threads = {args.threads} in the steps"
    details = [
        f"data: {args.pair_count:,} (anchor, positive) training pairs of `contrastext nli-to-beir` (SNLI dev + "
        f"test premises → entailed hypotheses, its seeded split); the bank at the training set's size holds their "
        f"{train_rows:,} distinct positives (real embeddings); larger banks add a `negatives.corpus` of distinct "
        f"lines whose rows are jittered copies of those ({args.jitter:g} σ, not encoded)",
        f"step = collate + forward + backward + clip + AdamW + schedule + after_step of `mnrl` on {model}, batch "
        f"{args.batch_size}, k = {args.k}, max length {args.max_length_used}, float32; median of {args.steps} "
        f"steps after {args.warmup} warm-up, {args.rounds} round(s), each cell in its own process, round-robin; the "
        "baseline (no bank) runs once a round and every row's "
        + ("ms/step and peak sit beside it (× baseline: against the row's twin, below)" if args.interleave
           else "× baseline and + MiB are against it"),
        "peak = largest resident set during the timed steps (VmHWM after resetting it); + MiB = minus the "
        "baseline's in the same round; + B per bank row = + MiB in bytes / bank rows (the bank alone: "
        "4·dim B a row)",
        *([
            "--interleave: each bank arm's child also holds the in-batch run (a twin, same seed) and steps both on "
            "every batch, the twin first on even steps and second on odd ones; × baseline = the median over steps "
            "of (arm's step / twin's step on the same batch, same process), then the median over rounds (each "
            "round's in the note under the table); the peak holds both runs, so + MiB is not given (a run without "
            "--interleave measures memory)"
        ] if args.interleave else []),
    ]
    begin, end = markdown_block.markers(SCRIPT, args.section_suffix)
    lines = [
        begin,
        *common.run_conditions(SCRIPT, args.argv, "cpu", load_before, versions, details,
                               load_note="(each cell in its own process, round-robin)"),
        "",
        f"| bank rows | negatives | ms/step | × baseline | peak MiB | + MiB | + B per bank row | recall@{args.k} vs "
        "exact | one-off s | amortised ms/step |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for size in args.bank_sizes:
        rows = train_rows if size == TRAIN else size
        for arm in args.arms:
            cell = cell_name(arm, size)
            if arm == BASELINE and size != TRAIN:
                continue
            words = ARM_WORDS[arm]
            if cell in skipped:
                reason = skipped[cell]
                if arm == "reencode-exact":
                    reason = reencode_estimate(table, rows) or reason
                lines.append(f"| {rows:,} | {words} | {reason} | – | – | – | – | – | – | – |")
                continue
            line = table[cell]
            first = line["first"]
            baseline = arm == BASELINE
            ratio = "1 (ref.)" if baseline else (f"{line['ratio']:.3f}" if "ratio" in line else "–")
            extra = "0 (ref.)" if baseline else (f"{line['extra']:+,.0f}" if "extra" in line else "–")
            per_row = "–" if baseline or "extra" not in line else f"{line['extra'] * common.MIB / rows:+,.0f}"
            recall = "–" if baseline else ("1 (exact)" if "recall" not in line else f"{line['recall']:.3f}")
            one_off, amortised = "–", "–"
            due = first.get("retrain_after", 1.0) * rows  # distinct rewritten rows that make a retraining due
            if "build_s" in line:
                one_off = f"{line['build_s']:,.1f} (index build, {args.build_threads} threads)"
                # A retraining is due after `due` rewritten rows; momentum rewrites only the training rows' positives.
                moving = min(train_rows, rows)
                amortised = ("0 (none due)" if moving < 0.1 * due
                             else f"{1e3 * line['build_s'] / (due / args.batch_size):,.2f}")
            if "reencode_s" in line:
                info = first["reencode"]
                one_off = f"{line['reencode_s']:,.2f} (re-encode of {info['texts']:,} texts)"
                amortised = f"{1e3 * line['reencode_s'] / info['every']:,.2f}"
                notes.append(
                    f"- re-encode refresh: one re-encoding of the {info['texts']:,}-row bank took "
                    f"{line['reencode_s']:,.2f} s on {args.threads} thread(s) (median over rounds); at "
                    f"reencode_every = {info['every']:,} that is {amortised} ms a step, "
                    f"{line['ms'] + 1e3 * line['reencode_s'] / info['every']:,.1f} ms/step in all. The run's log "
                    f"line: `{info['log']}`"
                )
            lines.append(
                f"| {rows:,} | {words} | {line['ms']:,.1f} | {ratio} | {line['peak']:,.0f} | {extra} | {per_row} "
                f"| {recall} | {one_off} | {amortised} |"
            )
            if "round_ratios" in line and len(line["round_ratios"]) > 1:
                notes.append(f"- {rows:,} rows, {words}: × baseline per round "
                             + ", ".join(f"{ratio:.3f}" for ratio in line["round_ratios"]))
            if "build_s" in line and first.get("nlist") is not None:
                when = ("fewer than a tenth of that, so none comes due" if min(train_rows, rows) < 0.1 * due
                        else f"amortised above as one build per {due / args.batch_size:,.0f} steps of {args.batch_size}")
                notes.append(
                    f"- {rows:,} rows, kept IVF index: nlist {first['nlist']}, nprobe {first['nprobe']}; it is "
                    f"retrained after retrain_after·N = {due:,.0f} distinct rows rewritten, and the momentum refresh "
                    f"rewrites only the {train_rows:,} training positives' rows: {when} "
                    f"({first.get('builds_during_steps', 0)} retrainings during the timed steps, "
                    f"{first.get('exact_fallbacks', 0)} exact fallbacks)"
                )
    lines += ["", *notes]
    if not all(line["peak_reset"] for line in table.values()):
        lines.append("- /proc/self/clear_refs was not writable: peaks are the whole child's (set-up included)")
    lines.append(end)
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------------ CLI


def size_list(text: str) -> list[int]:
    """``train,1000000``: ``train`` is the training set's bank (0 here)."""
    sizes = []
    for part in (part.strip() for part in text.split(",")):
        if part == "train":
            sizes.append(TRAIN)
        elif part:
            try:
                sizes.append(int(part.replace("_", "")))
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected 'train' or row counts like train,1000000; got {text!r}") from None
    if not sizes or TRAIN not in sizes:
        raise argparse.ArgumentTypeError(f"the sizes must include 'train' (the baseline runs there); got {text!r}")
    return sizes


def arm_list(text: str) -> list[str]:
    arms = [arm.strip() for arm in text.split(",") if arm.strip()]
    unknown = [arm for arm in arms if arm not in ARMS]
    if unknown or BASELINE not in arms:
        raise argparse.ArgumentTypeError(f"arms must include {BASELINE} and be among {', '.join(ARMS)}; got {text!r}")
    return arms


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bank-sizes", type=size_list, default=[TRAIN, 1_000_000],
                        help="train (the training set's bank) and row counts (default train,1000000)")
    parser.add_argument("--arms", type=arm_list, default=list(ARMS), help="comma-separated: " + ", ".join(ARMS))
    parser.add_argument("--steps", type=int, default=20, help="timed steps per child")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch and faiss threads in the steps")
    parser.add_argument("--build-threads", type=int, default=1,
                        help="threads of the kept index's build (default 1; more only on a quiet machine)")
    parser.add_argument("--k", type=int, default=8, help="negatives.k")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=None, help="data.max_length (default: the recipe's)")
    parser.add_argument("--pairs", type=int, default=None, help="the first N training pairs only")
    parser.add_argument("--reencode-every", type=int, default=1000, help="negatives.reencode_every")
    parser.add_argument("--jitter", type=float, default=0.25, help="noise of the corpus rows, × embedding std")
    parser.add_argument("--recall-batches", type=int, default=8)
    parser.add_argument("--faiss-max-rows", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a child may run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="the encoder (--set model=...; default the recipe's)")
    parser.add_argument("--data-root", type=Path, default=common.default_data_root())
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "contrastext-bench")
    parser.add_argument("--nprobe", type=int, default=None,
                        help="negatives.search_nprobe of the ivf arm (default: IVFSearch's, 2048/sqrt(nlist))")
    parser.add_argument("--interleave", action="store_true",
                        help="each bank arm's child also steps an in-batch twin on the same batches: time paired "
                        "within a process (no memory column)")
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="smoke run: 120 pairs, banks of their positives and of 12,000 rows, 1 round of 2 steps")
    markdown_block.add_suffix_option(parser)
    common.add_worker_options(parser)
    parser.add_argument("--pairs-file", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--bank-file", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--corpus-file", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.bank_sizes, args.steps, args.warmup, args.rounds = [TRAIN, 12_000], 2, 1, 1
        args.batch_size, args.recall_batches, args.faiss_max_rows = 8, 2, 1000
        args.pairs = args.pairs or 120
        args.max_length = args.max_length or 32
    if args.nprobe is not None and args.nprobe < 1:
        parser.error("need --nprobe >= 1")
    if min(args.steps, args.rounds, args.threads, args.build_threads, args.batch_size, args.k) < 1 or args.warmup < 0:
        parser.error("need --steps, --rounds, --threads, --build-threads, --batch-size, --k >= 1 and --warmup >= 0")
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker is not None:
        return worker(args)
    import torch

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-online-negatives-") as folder:
        work = Path(folder)
        pairs = training_pairs(args.data_root, args.pairs)
        args.pair_count = len(pairs)
        args.pairs_file = work / "pairs.csv"
        args.pairs_hash = write_pairs(args.pairs_file, pairs)
        args.max_length_used = recipe_config(args, BASELINE).data.max_length
        args.bank_file = encode_bank(args)
        texts = torch.load(args.bank_file)["texts"]
        args.train_rows = len(texts)
        if args.batch_size > len(pairs) or args.k >= args.train_rows:
            raise SystemExit(f"error: {len(pairs)} pairs, {args.train_rows} bank rows: too few for --batch-size "
                             f"{args.batch_size} and --k {args.k}")
        small = [size for size in args.bank_sizes if size != TRAIN and size <= args.train_rows]
        if small:
            raise SystemExit(f"error: --bank-sizes {small}: not above the training set's {args.train_rows} rows")
        args.corpus_files = {size: corpus_file(args, texts, size) for size in args.bank_sizes if size != TRAIN}
        cells, skipped = [], {}
        for size in args.bank_sizes:
            for arm in args.arms:
                reason = skip_reason(arm, size, args.train_rows, args)
                if reason is None:
                    cells.append(cell_name(arm, size))
                else:
                    skipped[cell_name(arm, size)] = reason
        results = measure(args, cells, work)
    report = render(args, load_before, summarise(results), skipped)
    common.publish_report(report, args, SCRIPT, SECTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
