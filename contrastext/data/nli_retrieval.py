"""A BEIR retrieval folder built from NLI triplets (premise, entailed hypothesis, contradicted hypothesis).

The premises are the queries, every hypothesis is a document, and a query's relevant documents are the hypotheses
its premise entails (qrels score 1). A seeded shuffle of the distinct premises gives ``test_queries`` test queries,
then ``dev_queries`` dev queries; the rest are training premises. Training rows never contain a document relevant to
an evaluation query, so nothing of the test qrels is trained on:

- ``train_pairs.csv`` (anchor, positive): each training premise with each hypothesis it entails;
- ``train_triplets.csv`` (anchor, positive, negative): the training rows whose two hypotheses are both unjudged.

The folder: ``corpus.jsonl``, ``queries.jsonl`` (``{"_id", "text"}``), ``qrels/{test,dev}.tsv`` (BEIR's
``query-id, corpus-id, score``), ``corpus.txt`` (one document a line, for ``contrastext encode``), the two training
files and ``manifest.json`` (source, its SHA-256, the split and the counts). It is what ``contrastext eval --tasks
ir:FOLDER@test`` and sentence-transformers' ``InformationRetrievalEvaluator`` read (docs/RETRIEVAL.md).

Example::

    contrastext nli-to-beir -i ../shared/data/nli/snli_devtest_for_simcse.csv -o runs/nli-retrieval
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path

from contrastext.errors import ConfigError

COLUMNS = ("sent0", "sent1", "hard_neg")  # SimCSE's NLI file: premise, entailed, contradicted


def read_nli_triplets(path: str | Path) -> list[tuple[str, str, str]]:
    """The ``(premise, entailed, contradicted)`` rows of a CSV with the columns ``sent0,sent1,hard_neg``; a missing
    column or an empty field is an error naming the file and line."""
    path = Path(path)
    with path.open(encoding="utf-8", newline="") as stream:
        reader = csv.DictReader(stream)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ConfigError(f"{path}:1: expected the columns {','.join(COLUMNS)}")
        rows = []
        for number, row in enumerate(reader, start=2):
            texts = tuple((row[column] or "").strip() for column in COLUMNS)
            if not all(texts):
                raise ConfigError(f"{path}:{number}: an empty text")
            rows.append(texts)
    return rows


def build_nli_retrieval(source: str | Path, seed: int = 0, test_queries: int = 1000, dev_queries: int = 500,
                        name: str | None = None) -> dict:
    """Everything the folder holds, as Python objects: ``corpus`` and ``queries`` ({id: text}), ``qrels`` ({split:
    [(query id, document id)]}), ``pairs``, ``triplets`` and ``manifest`` (``name``: the source as the manifest
    names it; its path by default)."""
    source = Path(source)
    rows = read_nli_triplets(source)
    hypotheses = sorted({text for _, entailed, contradicted in rows for text in (entailed, contradicted)})
    document_id = {text: f"d{index}" for index, text in enumerate(hypotheses)}
    entailed_by: dict[str, list[str]] = defaultdict(list)
    for premise, entailed, _ in rows:
        if entailed not in entailed_by[premise]:
            entailed_by[premise].append(entailed)
    premises = sorted(entailed_by)
    random.Random(seed).shuffle(premises)
    if len(premises) <= test_queries + dev_queries:
        raise ConfigError(f"{source}: {len(premises)} premises, too few for {test_queries} test and {dev_queries} "
                          "dev queries and a training split")
    held_out = {"test": premises[:test_queries], "dev": premises[test_queries:test_queries + dev_queries]}
    training = premises[test_queries + dev_queries:]
    queries = {f"q{index}": premise for index, premise in enumerate(held_out["test"] + held_out["dev"])}
    query_id = {premise: qid for qid, premise in queries.items()}
    qrels = {split: [(query_id[p], document_id[text]) for p in split_premises for text in entailed_by[p]]
             for split, split_premises in held_out.items()}
    relevant = {text for split_premises in held_out.values() for p in split_premises for text in entailed_by[p]}
    all_pairs = [(premise, text) for premise in training for text in entailed_by[premise]]
    pairs = [(premise, text) for premise, text in all_pairs if text not in relevant]
    kept = set(training)
    triplets = sorted({row for row in rows if row[0] in kept and row[1] not in relevant and row[2] not in relevant})
    manifest = {"source": name or str(source), "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
                "seed": seed, "corpus": len(hypotheses), "queries": {s: len(found) for s, found in held_out.items()},
                "qrels": {split: len(judged) for split, judged in qrels.items()}, "train_pairs": len(pairs),
                "train_pairs_left_out": len(all_pairs) - len(pairs), "train_triplets": len(triplets)}
    return {"corpus": {document_id[text]: text for text in hypotheses}, "queries": queries, "qrels": qrels,
            "pairs": pairs, "triplets": triplets, "manifest": manifest}


def write_beir_folder(built: dict, output: str | Path) -> Path:
    """Write :func:`build_nli_retrieval`'s folder to ``output``, which must be new or empty (nothing is
    overwritten)."""
    output = Path(output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ConfigError(f"{output}: exists and is not an empty folder; give a new folder")
    (output / "qrels").mkdir(parents=True, exist_ok=True)
    for name in ("corpus", "queries"):
        with (output / f"{name}.jsonl").open("w", encoding="utf-8") as stream:
            stream.writelines(json.dumps({"_id": key, "text": text}, ensure_ascii=False) + "\n"
                              for key, text in built[name].items())
    (output / "corpus.txt").write_text("".join(text + "\n" for text in built["corpus"].values()), encoding="utf-8")
    for split, judged in built["qrels"].items():
        with (output / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as stream:
            stream.write("query-id\tcorpus-id\tscore\n")
            stream.writelines(f"{query}\t{document}\t1\n" for query, document in judged)
    for name, header in (("pairs", ("anchor", "positive")), ("triplets", ("anchor", "positive", "negative"))):
        with (output / f"train_{name}.csv").open("w", encoding="utf-8", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(header)
            writer.writerows(built[name])
    (output / "manifest.json").write_text(json.dumps(built["manifest"], indent=1) + "\n", encoding="utf-8")
    return output
