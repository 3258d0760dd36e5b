"""Benchmark: ``contrastext eval --tasks ir:DIR`` (``evaluate_information_retrieval``) against sentence-transformers'
``InformationRetrievalEvaluator`` on a BEIR-style corpus of 1M documents: time, peak memory, the same nDCG@10.

Usage::

    python bench/information_retrieval.py [--corpus-size 1_000_000] [--queries 1000] [--batch-size 64]
                                          [--model random-tiny] [--rounds 1] [--threads 1] [--timeout 3600]
                                          [--data-root ../shared/data] [--output BENCHMARKS.md]
                                          [--section-suffix TEXT] [--quick]

The data (written once, in the BEIR layout, to a temporary folder that both sides read): the distinct sentences of
wiki1m (``--data-root``); document ``d<i>`` is sentence ``i mod n`` followed by the last four words of another
sentence (chosen so that no (sentence, words) pair repeats; a text that would still repeat gets `` (<i>)``), so
every text is distinct though the corpus is far larger than the file. ``--queries`` queries (seeded): each takes a
document at random, keeps about 60 % of its words in order, and is judged relevant to that document plus 0–2
others drawn at random (1–3 relevant documents, qrels score 1).

The encoder: by default (``--model random-tiny``) a randomly initialised one-layer, 64-wide BERT with
all-MiniLM-L6-v2's tokenizer, mean pooling and normalisation (``bench/random_model.py``), saved as a
sentence-transformers folder that **both** sides load: 1M texts through all-MiniLM-L6-v2 take about an hour per
side on one CPU core, and what is measured is the evaluator (the encoding path, the chunked search, the metrics,
the memory), not the model. ``--model bundled:all-MiniLM-L6-v2`` (or a folder) uses real weights instead.

The two arms, each in a fresh process (this script with ``--worker``), ``--rounds`` rounds round-robin (medians):

- **ours**: ``load_model`` then ``evaluate_tasks(encoder, ["ir:DIR"])``, what ``contrastext eval --tasks ir:DIR``
  runs: the BEIR reader, the queries and the corpus encoded once, the corpus searched in chunks of 50,000
  (``search_top_k``), cosine and dot, every metric at k ∈ {1, 3, 5, 10, 100};
- **sentence-transformers**: ``SentenceTransformer(DIR)``, the three files read into dicts, then
  ``InformationRetrievalEvaluator(queries, corpus, relevant_docs, corpus_chunk_size=50000, score_functions={cosine,
  dot}, every metric at the same k, batch_size=--batch-size)(model)``: the same work (its defaults would score
  cosine only and fewer k).

Reported per arm: the process's wall time (start-up and imports included), the model load, the evaluation
(reading the files, encoding, search, metrics), the peak resident set of the child (its own ``VmHWM`` at
its end: ``ru_maxrss`` would be floored by the parent's size, see ``bench/child_process.py``), and
``cosine_ndcg@10`` of both, which must agree within 1e-6 (exit status 1 otherwise). An arm still running after ``--timeout`` seconds is stopped and shown as ``> T s``.
``--threads`` (default 1) is ``torch.set_num_threads`` and ``OMP_NUM_THREADS`` in the children. ``--quick`` is a
smoke run (20,000 documents, one round): its numbers mean nothing. The report goes to stdout and, with
``--output``, replaces the block between ``<!-- begin bench/information_retrieval.py -->`` / ``<!-- end ... -->``
of that file.
"""

from __future__ import annotations

import argparse
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

SCRIPT = "information_retrieval.py"
BEGIN_MARKER, END_MARKER = markdown_block.markers(SCRIPT)  # --section-suffix appends to them
SECTION = "## Retrieval evaluation at 1M documents: eval --tasks ir: vs sentence-transformers"
ARMS = ("ours", "st")
ARM_NAMES = {"ours": "contrastext `eval --tasks ir:`", "st": "ST `InformationRetrievalEvaluator`"}
KS = (1, 3, 5, 10, 100)
CORPUS_CHUNK = 50_000
SUFFIX_WORDS = 4
KEPT_SHARE = 0.6
TOLERANCE = 1e-6
SEED = 0


# ------------------------------------------------------------------------------------------------ data


def wiki_sentences(data_root: Path) -> list[str]:
    """The distinct non-empty lines of the wiki1m file under ``data_root`` (file order)."""
    files = sorted((data_root / "wiki1m").glob("wiki1m_for_simcse*.txt"))
    if not files:
        raise SystemExit(f"error: no wiki1m_for_simcse*.txt under {data_root / 'wiki1m'} (--data-root)")
    lines = (line.strip() for line in files[0].read_text(encoding="utf-8").splitlines())
    return list(dict.fromkeys(line for line in lines if line))


def make_corpus(sentences: list[str], size: int) -> list[str]:
    """``size`` distinct texts: sentence ``i mod n`` + the last words of sentence ``(131·(i div n) + 7·a + 1) mod n``."""
    n = len(sentences)
    tails = [" ".join(sentence.split()[-SUFFIX_WORDS:]) for sentence in sentences]
    texts, seen = [], set()
    for index in range(size):
        base = index % n
        text = f"{sentences[base]} {tails[(131 * (index // n) + 7 * base + 1) % n]}"
        if text in seen:
            text = f"{text} ({index})"
        seen.add(text)
        texts.append(text)
    return texts


def make_queries(corpus: list[str], count: int) -> tuple[list[str], list[list[int]]]:
    """``count`` queries (about 60 % of a random document's words, in order) and each one's relevant rows."""
    draw = random.Random(SEED)
    queries, relevant = [], []
    for _ in range(count):
        target = draw.randrange(len(corpus))
        words = corpus[target].split()
        kept = sorted(draw.sample(range(len(words)), min(len(words), max(3, round(len(words) * KEPT_SHARE)))))
        queries.append(" ".join(words[i] for i in kept))
        others = {draw.randrange(len(corpus)) for _ in range(draw.randint(0, 2))} - {target}
        relevant.append([target, *sorted(others)])
    return queries, relevant


def write_beir(folder: Path, corpus: list[str], queries: list[str], relevant: list[list[int]]) -> None:
    """``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv`` (with its header) under ``folder``."""
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for index, text in enumerate(corpus):
            out.write(json.dumps({"_id": f"d{index}", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as out:
        for index, text in enumerate(queries):
            out.write(json.dumps({"_id": f"q{index}", "text": text}) + "\n")
    with open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for index, rows in enumerate(relevant):
            out.writelines(f"q{index}\td{row}\t1\n" for row in rows)


# ---------------------------------------------------------------------------------------------- workers


def read_beir_dicts(folder: Path) -> tuple[dict[str, str], dict[str, str], dict[str, set[str]]]:
    """The ST arm's reading of the folder: (queries, corpus, relevant_docs) as ST's evaluator takes them."""
    def texts(name: str) -> dict[str, str]:
        with open(folder / name, encoding="utf-8") as lines:
            return {row["_id"]: row["text"] for row in map(json.loads, lines)}

    relevant: dict[str, set[str]] = {}
    with open(folder / "qrels" / "test.tsv", encoding="utf-8") as lines:
        next(lines)
        for line in lines:
            query, document, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                relevant.setdefault(query, set()).add(document)
    return texts("queries.jsonl"), texts("corpus.jsonl"), relevant


def worker(args: argparse.Namespace) -> int:
    """One arm: model load and evaluation seconds and ``cosine_ndcg@10`` into ``--result`` (JSON)."""
    import torch

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if args.worker == "ours":
        from contrastext.cli.encode_command import load_model
        from contrastext.evaluation.suite import evaluate_tasks

        encoder = load_model(args.model)
        loaded = time.perf_counter()
        results = evaluate_tasks(encoder, [f"ir:{args.data}"], args.data.parent, batch_size=args.batch_size)
        ndcg = next(iter(results["tasks"].values()))["cosine_ndcg@10"] / 100
    else:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.evaluation import InformationRetrievalEvaluator
        from sentence_transformers.util import cos_sim, dot_score

        model = SentenceTransformer(str(args.model), device="cpu")
        loaded = time.perf_counter()
        queries, corpus, relevant = read_beir_dicts(args.data)
        ks = list(KS)
        evaluator = InformationRetrievalEvaluator(
            queries, corpus, relevant, corpus_chunk_size=CORPUS_CHUNK, mrr_at_k=ks, ndcg_at_k=ks, accuracy_at_k=ks,
            precision_recall_at_k=ks, map_at_k=ks, batch_size=args.batch_size, write_csv=False,
            score_functions={"cosine": cos_sim, "dot": dot_score},
        )
        ndcg = evaluator(model)["cosine_ndcg@10"]
    done = time.perf_counter()
    Path(args.result).write_text(json.dumps({"load": loaded - start, "evaluate": done - loaded, "ndcg": ndcg,
                                             "rss_mib": common.status_mib("VmHWM")}))
    return 0


# ---------------------------------------------------------------------------------------------- parent


def measure(args: argparse.Namespace, data: Path, model: Path, folder: Path) -> dict[str, list[dict]]:
    """Every arm ``--rounds`` times in a fresh process (``child_process.round_robin``); ``rss_mib``: its VmHWM."""
    worker_args = ["--data", str(data), "--model", str(model), "--batch-size", str(args.batch_size)]
    return child_process.round_robin(ARMS, args.rounds, lambda arm, round_index: child_process.run_worker(
        __file__, arm, folder / f"{arm}-{round_index}.json", worker_args, args.threads, args.timeout))


def render(args: argparse.Namespace, load_before, results: dict[str, list[dict]], model_words: str) -> tuple[str, bool]:
    """The markdown block and whether both arms finished with the same ``cosine_ndcg@10``."""
    import sentence_transformers
    import torch

    versions = (f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, "
                f"{args.threads} thread(s), batch size {args.batch_size}")
    details = [
        f"data: {args.corpus_size:,} documents (distinct wiki1m sentences, each + the last {SUFFIX_WORDS} words of "
        f"another: distinct texts), {args.queries:,} queries (≈{KEPT_SHARE:.0%} of a random document's words) with "
        "1–3 relevant documents each, BEIR layout, read by both arms",
        f"encoder: {model_words}; the measure is the evaluator (encoding path, chunked search, metrics, memory), "
        "not the model",
        f"both arms: cosine and dot, accuracy / precision / recall / MRR / nDCG / MAP at k ∈ {{{', '.join(map(str, KS))}}}, "
        f"corpus chunks of {CORPUS_CHUNK:,}",
        f"each arm in a fresh process, {args.rounds} round(s) round-robin, medians; peak RSS: the child's own VmHWM "
        f"at its end; timeout {args.timeout:.0f} s",
    ]
    lines = ["| arm | process wall | imports + model load | evaluation (read + encode + search + metrics) | peak RSS | "
             "cosine_ndcg@10 | wall / ours |", "|---|---|---|---|---|---|---|"]
    ours = results["ours"]
    for arm in ARMS:
        runs = results[arm]
        if not child_process.finished(runs):
            lines.append(f"| {ARM_NAMES[arm]} | > {args.timeout:.0f} s (stopped) | – | – | – | – | – |")
            continue
        ratio = child_process.median(runs, "wall") / child_process.median(ours, "wall") if child_process.finished(ours) else float("nan")
        lines.append(f"| {ARM_NAMES[arm]} | {child_process.median(runs, 'wall'):.1f} s | {child_process.median(runs, 'load'):.1f} s | "
                     f"{child_process.median(runs, 'evaluate'):.1f} s | {child_process.median(runs, 'rss_mib'):,.0f} MiB | {runs[0]['ndcg']:.8f} | "
                     f"{ratio:.2f}× |")
    same = child_process.finished(ours) and child_process.finished(results["st"])
    if same:
        difference = abs(ours[0]["ndcg"] - results["st"][0]["ndcg"])
        same = difference <= TOLERANCE
        verdict = (f"Same cosine_ndcg@10 on both sides: {'yes' if same else 'NO'} "
                   f"(|Δ| = {difference:.1e}, tolerance {TOLERANCE:.0e}).")
    else:
        verdict = "Same cosine_ndcg@10: not checked (an arm did not finish)."
    begin, end = markdown_block.markers(SCRIPT, args.section_suffix)
    conditions = common.run_conditions(SCRIPT, args.argv, "cpu", load_before, versions, details)
    report = "\n".join([begin, *conditions, "", "### One evaluation", "", *lines, "", verdict, end]) + "\n"
    return report, same


def size(text: str) -> int:
    return int(text.replace("_", ""))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus-size", type=size, default=1_000_000, help="documents (default 1,000,000)")
    parser.add_argument("--queries", type=size, default=1000, help="queries (default 1,000)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default=random_model.RANDOM_TINY,
                        help=f"{random_model.RANDOM_TINY} (default: a random 1 × 64 BERT), bundled:NAME or a folder")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds an arm may run (default 3600)")
    parser.add_argument("--data-root", type=Path, default=common.default_data_root())
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20,000 documents, one round")
    markdown_block.add_suffix_option(parser)
    parser.add_argument("--worker", choices=ARMS, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.corpus_size, args.rounds = 20_000, 1
    if args.corpus_size < 200 or args.queries < 1 or args.batch_size < 1 or args.rounds < 1 or args.threads < 1:
        parser.error("need --corpus-size >= 200 and --queries, --batch-size, --rounds, --threads >= 1")
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker is not None:
        return worker(args)
    work = Path(tempfile.mkdtemp(prefix="bench-ir-"))
    try:
        model, model_words = random_model.model_for_bench(args.model, work)
        corpus = make_corpus(wiki_sentences(args.data_root), args.corpus_size)
        queries, relevant = make_queries(corpus, args.queries)
        write_beir(work / "beir", corpus, queries, relevant)
        del corpus
        load_before = os.getloadavg()
        results = measure(args, work / "beir", model, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report, same = render(args, load_before, results, model_words)
    common.publish_report(report, args, SCRIPT, SECTION)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
