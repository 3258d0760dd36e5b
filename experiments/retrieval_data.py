"""Build a retrieval benchmark from the shared SNLI triplets: (query, positive) training pairs and a BEIR folder.

Source: ``nli/snli_devtest_for_simcse.csv`` of the data root (sent0, sent1, hard_neg: a premise, a hypothesis it
entails and one it contradicts; SimCSE's supervised format built from SNLI dev + test). The retrieval task: given
a premise, find the hypotheses it entails among every hypothesis of the file. The contradicting hypothesis of the
same premise is in the corpus, so every query has a lexically close distractor.

- The corpus: every distinct hypothesis text of the file (entailed or contradicted), one document each; it is
  shared by the training and the evaluation queries, as MS MARCO's corpus is shared by its train and dev queries.
- The premises (distinct ``sent0`` texts) are split with a fixed seed: ``--test-queries`` (1,000) for
  ``qrels/test.tsv``, ``--dev-queries`` (500) for ``qrels/dev.tsv``, the rest for training. A query's relevant
  documents are its entailed hypotheses (qrels score 1).
- The training pairs ``(anchor, positive)`` are the training premises with their entailed hypotheses; a pair whose
  hypothesis is also relevant to an evaluation query is left out (counted in the manifest). The contradictions
  are not in the pairs: hard negatives are the miner's job (``contrastext mine``).
- ``train_triplets.csv`` ``(anchor, positive, negative)``: the same training rows with the file's own hard
  negative, the contradicted hypothesis (SimCSE's supervised triplets), for rows where neither hypothesis is
  relevant to an evaluation query.

Written to ``--output`` (a new folder; an existing non-empty one is refused):

    corpus.jsonl  queries.jsonl  qrels/test.tsv  qrels/dev.tsv   the BEIR layout (``ir:FOLDER@test``)
    corpus.txt                                                   the corpus texts, one a line (``encode -i``)
    train_pairs.csv                                              anchor,positive
    train_triplets.csv                                           anchor,positive,negative
    manifest.json                                                the counts, the seed, the source's sha256

The held-out part is ours (a seeded split of SNLI dev + test): state it beside every number built on it.

Example::

    .venv/bin/python experiments/retrieval_data.py --data-root ../shared/data --output runs/nli-retrieval
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

SOURCE = Path("nli") / "snli_devtest_for_simcse.csv"
DEFAULTS = {"seed": 0, "test_queries": 1000, "dev_queries": 500}
COLUMNS = ("sent0", "sent1", "hard_neg")


def read_triplets(path: Path) -> list[tuple[str, str, str]]:
    """The ``(premise, entailed, contradicted)`` rows; a row with an empty field is an error naming its line."""
    with path.open(encoding="utf-8", newline="") as stream:
        reader = csv.DictReader(stream)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise SystemExit(f"error: {path}:1: expected the columns {','.join(COLUMNS)}")
        rows = []
        for number, row in enumerate(reader, start=2):
            texts = tuple((row[column] or "").strip() for column in COLUMNS)
            if not all(texts):
                raise SystemExit(f"error: {path}:{number}: an empty text")
            rows.append(texts)
    return rows


def build(data_root: Path, seed: int, test_queries: int, dev_queries: int) -> dict:
    """Everything the folder holds, as Python objects (see the module docstring)."""
    source = data_root / SOURCE
    rows = read_triplets(source)
    hypotheses = sorted({text for _, entailed, contradicted in rows for text in (entailed, contradicted)})
    document_id = {text: f"d{index}" for index, text in enumerate(hypotheses)}
    entailed_by: dict[str, list[str]] = defaultdict(list)
    for premise, entailed, _ in rows:
        if entailed not in entailed_by[premise]:
            entailed_by[premise].append(entailed)
    premises = sorted(entailed_by)
    random.Random(seed).shuffle(premises)
    if len(premises) <= test_queries + dev_queries:
        raise SystemExit(f"error: {source}: {len(premises)} premises, too few for the queries asked for")
    held_out = {"test": premises[:test_queries], "dev": premises[test_queries:test_queries + dev_queries]}
    training = premises[test_queries + dev_queries:]

    queries = {f"q{index}": premise for index, premise in enumerate(held_out["test"] + held_out["dev"])}
    query_id = {premise: qid for qid, premise in queries.items()}
    qrels = {
        split: [(query_id[premise], document_id[text]) for premise in split_premises for text in entailed_by[premise]]
        for split, split_premises in held_out.items()
    }
    relevant_texts = {text for split_premises in held_out.values() for p in split_premises for text in entailed_by[p]}
    all_pairs = [(premise, text) for premise in training for text in entailed_by[premise]]
    pairs = [(premise, text) for premise, text in all_pairs if text not in relevant_texts]
    training_premises = set(training)
    triplets = sorted({
        row for row in rows
        if row[0] in training_premises and row[1] not in relevant_texts and row[2] not in relevant_texts
    })
    return {
        "corpus": {document_id[text]: text for text in hypotheses},
        "queries": queries,
        "qrels": qrels,
        "pairs": pairs,
        "triplets": triplets,
        "manifest": {
            "source": str(SOURCE),
            "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
            "seed": seed,
            "corpus": len(hypotheses),
            "queries": {split: len(split_premises) for split, split_premises in held_out.items()},
            "qrels": {split: len(judged) for split, judged in qrels.items()},
            "train_pairs": len(pairs),
            "train_pairs_left_out": len(all_pairs) - len(pairs),
            "train_triplets": len(triplets),
        },
    }


def write(built: dict, output: Path) -> None:
    """Write the folder (refusing a non-empty one: nothing is overwritten)."""
    if output.exists() and any(output.iterdir()):
        raise SystemExit(f"error: {output}: exists and is not empty; give a new folder")
    (output / "qrels").mkdir(parents=True, exist_ok=True)
    for name in ("corpus", "queries"):
        with (output / f"{name}.jsonl").open("w", encoding="utf-8") as stream:
            for key, text in built[name].items():
                stream.write(json.dumps({"_id": key, "text": text}, ensure_ascii=False) + "\n")
    (output / "corpus.txt").write_text("".join(text + "\n" for text in built["corpus"].values()), encoding="utf-8")
    for split, judged in built["qrels"].items():
        with (output / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as stream:
            stream.write("query-id\tcorpus-id\tscore\n")
            stream.writelines(f"{query}\t{document}\t1\n" for query, document in judged)
    write_table(output / "train_pairs.csv", ("anchor", "positive"), built["pairs"])
    write_table(output / "train_triplets.csv", ("anchor", "positive", "negative"), built["triplets"])
    (output / "manifest.json").write_text(json.dumps(built["manifest"], indent=1) + "\n", encoding="utf-8")


def write_table(path: Path, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """A CSV file with a header row."""
    with path.open("w", encoding="utf-8", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--output", type=Path, required=True, help="a new folder")
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    parser.add_argument("--test-queries", type=int, default=DEFAULTS["test_queries"])
    parser.add_argument("--dev-queries", type=int, default=DEFAULTS["dev_queries"])
    args = parser.parse_args(argv)
    if not (args.data_root / SOURCE).is_file():
        print(f"error: {args.data_root / SOURCE}: not found (give --data-root)", file=sys.stderr)
        return 2
    built = build(args.data_root, args.seed, args.test_queries, args.dev_queries)
    write(built, args.output)
    print(json.dumps(built["manifest"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
