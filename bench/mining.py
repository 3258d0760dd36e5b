"""Benchmark: ``contrastext mine`` (exact search) against sentence-transformers' ``mine_hard_negatives``
(``use_faiss=False``, and ``use_faiss=True`` where faiss is installed) on the same (query, positive) rows.

Usage::

    python bench/mining.py [--pairs 50_000] [--batch-size 64] [--model random-tiny] [--rounds 1] [--threads 1]
                           [--arms ours,st,st-faiss] [--timeout 900] [--data-root ../shared/data]
                           [--output BENCHMARKS.md] [--section-suffix TEXT] [--quick]

The rows (written once to a CSV that every arm reads): the question pairs of QQP's dev subset and of Quora dev
(``glue/QQP``, ``minbert/quora-dev.csv``; their labels are not used: the bench times mining, it trains nothing),
then SNLI's (premise, entailment) pairs (``nli/snli_devtest_for_simcse.csv``), then, when ``--pairs`` asks for more
than those ~49,600, (wiki1m sentence, about 60 % of its words) pairs; the first ``--pairs`` of them. The same options
on every arm: ``num_negatives=5``, ``range_max=50``, ``sampling_strategy="top"``, ``output_format="n-tuple"``,
no margin, the positives as the corpus, batch size ``--batch-size``.

The encoder: by default (``--model random-tiny``) a randomly initialised one-layer, 64-wide BERT with
all-MiniLM-L6-v2's tokenizer, mean pooling and normalisation (``bench/random_model.py``), saved as a
sentence-transformers folder that every arm loads: 50,000 pairs (~90,000 distinct texts) then take 1–2 minutes per
arm on one CPU core, where all-MiniLM-L6-v2 would take about ten (the brief: each arm within 3 minutes on 2 cores).
What is measured is the mining path (encoding, search, filtering, writing), not the model. Its neighbours are
those of a random model, nearer to each other than a trained model's, so more of them are near-ties: the overlap
on real weights is ``--model bundled:all-MiniLM-L6-v2 --pairs 10000`` (about 3 minutes per arm).

The arms, each in a fresh process (this script with ``--worker``), ``--rounds`` rounds round-robin (medians):

- **ours**: ``mine_command(...)`` in the worker, what ``contrastext mine -m MODEL -i pairs.csv -o mined.jsonl
  --num-negatives 5 --range-max 50 --output-format n-tuple --no-progress`` runs (read, load the model, encode,
  exact search, write);
- **st** / **st-faiss**: the CSV read into a ``datasets.Dataset``, ``SentenceTransformer(MODEL)``,
  ``mine_hard_negatives(dataset, model, ..., use_faiss=False / True, verbose=False)``, ``.to_json(mined.jsonl)``.

Reported per arm: the process's wall time, the command's time (read + model load + encode + search + write), the
peak resident set of the child (its own ``VmHWM`` at its end: ``ru_maxrss`` would be
floored by the parent's size, see ``bench/child_process.py``), the rows written, and
the overlap of its negatives with ours: over the queries both wrote, Σ |ours ∩ theirs| / Σ |theirs| (ties at the
cut may fall either way: exact search on both sides gives the same sets otherwise). An arm still running after
``--timeout`` seconds is stopped and shown as ``> T s``. ``--quick`` is a smoke run (5,000 pairs, one round): its
numbers mean nothing. The report goes to stdout and, with ``--output``, replaces the block between
``<!-- begin bench/mining.py -->`` / ``<!-- end ... -->`` of that file. Exit status 1 when an ST arm that
finished overlaps ours below 95 %.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
import child_process  # noqa: E402
import common  # noqa: E402
import markdown_block  # noqa: E402
import random_model  # noqa: E402

SCRIPT = "mining.py"
BEGIN_MARKER, END_MARKER = markdown_block.markers(SCRIPT)  # --section-suffix appends to them
SECTION = "## Hard-negative mining: contrastext mine vs sentence-transformers"
ARMS = ("ours", "st", "st-faiss")
ARM_NAMES = {"ours": "contrastext `mine` (exact)", "st": "ST `mine_hard_negatives` (use_faiss=False)",
             "st-faiss": "ST `mine_hard_negatives` (use_faiss=True)"}
NUM_NEGATIVES = 5
RANGE_MAX = 50
GOAL_OVERLAP = 0.95
KEPT_SHARE = 0.6
SEED = 0


# ------------------------------------------------------------------------------------------------ data


def question_pairs(data_root: Path) -> list[tuple[str, str]]:
    """(question 1, question 2) of QQP's dev subset (no header: id, qid1, qid2, q1, q2, label), then Quora dev."""
    pairs = []
    for path in sorted((data_root / "glue" / "QQP").glob("*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")
            if len(fields) >= 5 and not fields[0].isalpha():
                pairs.append((fields[3], fields[4]))
    quora = data_root / "minbert" / "quora-dev.csv"
    if quora.is_file():
        with open(quora, encoding="utf-8", newline="") as lines:
            pairs.extend((row["sentence1"], row["sentence2"]) for row in csv.DictReader(lines, delimiter="\t"))
    return pairs


def nli_pairs(data_root: Path) -> list[tuple[str, str]]:
    """(premise, entailed hypothesis) of SNLI's dev/test file for SimCSE."""
    path = data_root / "nli" / "snli_devtest_for_simcse.csv"
    if not path.is_file():
        return []
    with open(path, encoding="utf-8", newline="") as lines:
        return [(row["sent0"], row["sent1"]) for row in csv.DictReader(lines)]


def wiki_pairs(data_root: Path) -> list[tuple[str, str]]:
    """(sentence, ≈60 % of its words in order) for every distinct wiki1m sentence (seeded)."""
    files = sorted((data_root / "wiki1m").glob("wiki1m_for_simcse*.txt"))
    if not files:
        return []
    draw = random.Random(SEED)
    pairs = []
    for sentence in dict.fromkeys(line.strip() for line in files[0].read_text(encoding="utf-8").splitlines()):
        words = sentence.split()
        if len(words) >= 4:
            kept = sorted(draw.sample(range(len(words)), round(len(words) * KEPT_SHARE)))
            pairs.append((sentence, " ".join(words[i] for i in kept)))
    return pairs


def make_pairs(data_root: Path, count: int) -> list[tuple[str, str]]:
    """The first ``count`` usable pairs (both texts non-empty and different) of the sources, in the order above."""
    pairs: list[tuple[str, str]] = []
    for source in (question_pairs, nli_pairs, wiki_pairs):
        pairs.extend((q.strip(), p.strip()) for q, p in source(data_root) if q.strip() and p.strip() and q != p)
        if len(pairs) >= count:
            return pairs[:count]
    raise SystemExit(f"error: only {len(pairs):,} pairs under {data_root} (--data-root); ask for fewer with --pairs")


def write_pairs(path: Path, pairs: list[tuple[str, str]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_ALL)
        writer.writerow(["query", "positive"])
        writer.writerows(pairs)


def negatives_by_query(path: Path) -> dict[str, list[str]]:
    """An n-tuple JSONL file's negatives of each anchor (the first column), as a sorted list."""
    found: dict[str, set[str]] = {}
    with open(path, encoding="utf-8") as lines:
        for row in map(json.loads, lines):
            values = list(row.items())
            found.setdefault(values[0][1], set()).update(v for key, v in values if key.startswith("negative"))
    return {query: sorted(negatives) for query, negatives in found.items()}


def overlap(ours: dict[str, list[str]], theirs: dict[str, list[str]]) -> tuple[float, int]:
    """Σ |ours ∩ theirs| / Σ |theirs| over the queries both have, and how many queries only one has."""
    shared = ours.keys() & theirs.keys()
    common_count = sum(len(set(ours[q]) & set(theirs[q])) for q in shared)
    total = sum(len(theirs[q]) for q in shared)
    return (common_count / total if total else float("nan")), len(ours.keys() ^ theirs.keys())


# ---------------------------------------------------------------------------------------------- workers


def worker(args: argparse.Namespace) -> int:
    """One arm: the command's seconds, rows written and negatives per query into ``--result`` (JSON)."""
    import torch

    torch.set_num_threads(args.threads)
    mined = Path(args.result).with_suffix(".mined.jsonl")
    start = time.perf_counter()
    if args.worker == "ours":
        from contrastext.cli.mine_command import mine_command

        mine_command(model=str(args.model), input=args.pairs_file, output=mined, num_negatives=NUM_NEGATIVES,
                     range_max=RANGE_MAX, sampling_strategy="top", output_format="n-tuple", search="exact",
                     batch_size=args.batch_size, progress=False)
    else:
        from datasets import Dataset
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.util import mine_hard_negatives

        if args.worker == "st-faiss":
            import faiss

            faiss.omp_set_num_threads(args.threads)
        with open(args.pairs_file, encoding="utf-8", newline="") as lines:
            rows = list(csv.DictReader(lines))
        dataset = Dataset.from_dict({"query": [row["query"] for row in rows],
                                     "positive": [row["positive"] for row in rows]})
        model = SentenceTransformer(str(args.model), device="cpu")
        result = mine_hard_negatives(dataset, model, num_negatives=NUM_NEGATIVES, range_max=RANGE_MAX,
                                     sampling_strategy="top", output_format="n-tuple", batch_size=args.batch_size,
                                     use_faiss=args.worker == "st-faiss", verbose=False)
        result.to_json(str(mined), lines=True, force_ascii=False)
    seconds = time.perf_counter() - start
    with open(mined, encoding="utf-8") as lines:
        rows_written = sum(1 for _ in lines)
    rss = common.status_mib("VmHWM")
    Path(args.result).write_text(json.dumps({"command": seconds, "rows": rows_written, "rss_mib": rss,
                                             "negatives": negatives_by_query(mined)}))
    return 0


# ---------------------------------------------------------------------------------------------- parent


def measure(args: argparse.Namespace, pairs_file: Path, model: Path, folder: Path) -> dict[str, list[dict]]:
    """Every arm ``--rounds`` times in a fresh process (``child_process.round_robin``; ``rss_mib``: its VmHWM). Only
    the first round keeps the negatives (the same in every round)."""
    worker_args = ["--pairs-file", str(pairs_file), "--model", str(model), "--batch-size", str(args.batch_size)]

    def run_arm(arm: str, round_index: int) -> dict:
        run = child_process.run_worker(__file__, arm, folder / f"{arm}-{round_index}.json", worker_args,
                                       args.threads, args.timeout)
        if round_index:
            run.pop("negatives", None)
        return run

    return child_process.round_robin(list(args.arms), args.rounds, run_arm)


def render(args: argparse.Namespace, load_before, results: dict[str, list[dict]], model_words: str,
           distinct: tuple[int, int]) -> tuple[str, bool]:
    """The markdown block and whether every ST arm that finished overlaps ours at :data:`GOAL_OVERLAP` or more."""
    import sentence_transformers
    import torch

    faiss_version = "faiss not installed"
    if importlib.util.find_spec("faiss") is not None:
        import faiss

        faiss_version = f"faiss {faiss.__version__}"
    versions = (f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, {faiss_version}, "
                f"{args.threads} thread(s), batch size {args.batch_size}")
    details = [
        f"data: {args.pairs:,} (query, positive) rows ({distinct[0]:,} distinct queries, {distinct[1]:,} distinct "
        "positives: the corpus), QQP / Quora dev question pairs, then SNLI entailment pairs, then wiki1m "
        "(sentence, ≈60 % of its words) as far as needed",
        f"options on every arm: num_negatives {NUM_NEGATIVES}, range_max {RANGE_MAX}, sampling top, output n-tuple",
        f"encoder: {model_words}; the measure is the mining path (encoding, search, filtering, writing), not the model",
        f"each arm in a fresh process, {args.rounds} round(s) round-robin, medians; peak RSS: the child's own VmHWM "
        f"at its end; timeout {args.timeout:.0f} s; overlap: Σ |ours ∩ theirs| / Σ |theirs| over the queries both wrote",
    ]
    lines = ["| arm | process wall | command (read + load + encode + search + write) | peak RSS | rows written | "
             "negatives overlap with ours | queries only one side wrote | wall / ours |",
             "|---|---|---|---|---|---|---|---|"]
    ours = results.get("ours", [])
    good = True
    for arm in args.arms:
        runs = results[arm]
        if not child_process.finished(runs):
            lines.append(f"| {ARM_NAMES[arm]} | > {args.timeout:.0f} s (stopped) | – | – | – | – | – | – |")
            continue
        if child_process.finished(ours):
            share, lonely = overlap(ours[0]["negatives"], runs[0]["negatives"])
            ratio = child_process.median(runs, "wall") / child_process.median(ours, "wall")
            good &= arm == "ours" or share >= GOAL_OVERLAP
            shown = f"{share:.2%}"
        else:
            shown, lonely, ratio = "–", "–", float("nan")
        lines.append(f"| {ARM_NAMES[arm]} | {child_process.median(runs, 'wall'):.1f} s | {child_process.median(runs, 'command'):.1f} s | "
                     f"{child_process.median(runs, 'rss_mib'):,.0f} MiB | {runs[0]['rows']:,} | {shown} | {lonely} | {ratio:.2f}× |")
    begin, end = markdown_block.markers(SCRIPT, args.section_suffix)
    conditions = common.run_conditions(SCRIPT, args.argv, "cpu", load_before, versions, details)
    report = "\n".join([begin, *conditions, "", "### One mining run", "", *lines, end]) + "\n"
    return report, good


def arm_list(text: str) -> list[str]:
    arms = [part for part in text.split(",") if part]
    unknown = [arm for arm in arms if arm not in ARMS]
    if unknown or not arms:
        raise argparse.ArgumentTypeError(f"unknown arm {', '.join(unknown) or '(none)'}: choose from {', '.join(ARMS)}")
    return arms


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=lambda text: int(text.replace("_", "")), default=50_000,
                        help="(query, positive) rows (default 50,000)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default=random_model.RANDOM_TINY,
                        help=f"{random_model.RANDOM_TINY} (default: a random 1 × 64 BERT), bundled:NAME or a folder")
    parser.add_argument("--arms", type=arm_list, default=None,
                        help="comma-separated: ours, st, st-faiss (default: all; st-faiss only with faiss installed)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds an arm may run (default 900)")
    parser.add_argument("--data-root", type=Path, default=common.default_data_root())
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="smoke run: 5,000 pairs, one round")
    markdown_block.add_suffix_option(parser)
    parser.add_argument("--worker", choices=ARMS, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--pairs-file", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.rounds = 5_000, 1
    if args.pairs < 100 or args.batch_size < 1 or args.rounds < 1 or args.threads < 1:
        parser.error("need --pairs >= 100 and --batch-size, --rounds, --threads >= 1")
    if args.arms is None:
        args.arms = [arm for arm in ARMS if arm != "st-faiss" or importlib.util.find_spec("faiss") is not None]
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker is not None:
        return worker(args)
    work = Path(tempfile.mkdtemp(prefix="bench-mining-"))
    try:
        model, model_words = random_model.model_for_bench(args.model, work)
        pairs = make_pairs(args.data_root, args.pairs)
        write_pairs(work / "pairs.csv", pairs)
        distinct = (len({query for query, _ in pairs}), len({positive for _, positive in pairs}))
        load_before = os.getloadavg()
        results = measure(args, work / "pairs.csv", model, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report, good = render(args, load_before, results, model_words, distinct)
    common.publish_report(report, args, SCRIPT, SECTION)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
