"""Retrieval's hook (experiments/specs/retrieval.yaml): the BEIR folder built from the shared SNLI triplets
(``prepare``: ``nli/snli_devtest_for_simcse.csv``, premises as queries in a seeded split, the hypotheses as the
corpus, the entailed ones relevant; docs/RETRIEVAL.md, "The data") and the four commands a user runs, as
docs/RETRIEVAL.md gives them (mine -> train -> eval ir -> encode), as the runs. The folder
(``<runs>/retrieval/nli-retrieval``): corpus.jsonl, queries.jsonl, qrels/{test,dev}.tsv, corpus.txt,
train_pairs.csv, train_triplets.csv (where neither hypothesis is relevant to an evaluation query), manifest.json.
Alone::

    .venv/bin/python experiments/hooks/retrieval.py --data-root ../shared/data --output runs/nli-retrieval
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import yaml

SOURCE = Path("nli") / "snli_devtest_for_simcse.csv"
SPLIT = {"seed": 0, "test_queries": 1000, "dev_queries": 500}
COLUMNS = ("sent0", "sent1", "hard_neg")
MODEL = "bundled:all-MiniLM-L6-v2"  # the start, the miner's model and the retrieval recipe's
METRICS = ("cosine_ndcg@10", "cosine_mrr@10", "cosine_recall@100", "cosine_map@100")
MINE_OPTIONS = ("--num-negatives", "1", "--range-min", "10", "--range-max", "50", "--max-score", "0.8",
                "--relative-margin", "0.05", "--sampling-strategy", "random")
ENCODED_ARM = "mined"  # the workflow's last step, encode, runs once: the last seed of this arm
REPO = Path(__file__).resolve().parents[2]


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
    qrels = {split: [(query_id[p], document_id[text]) for p in split_premises for text in entailed_by[p]]
             for split, split_premises in held_out.items()}
    relevant = {text for split_premises in held_out.values() for p in split_premises for text in entailed_by[p]}
    all_pairs = [(premise, text) for premise in training for text in entailed_by[premise]]
    pairs = [(premise, text) for premise, text in all_pairs if text not in relevant]
    kept = set(training)
    triplets = sorted({row for row in rows if row[0] in kept and row[1] not in relevant and row[2] not in relevant})
    manifest = {"source": str(SOURCE), "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(), "seed": seed,
                "corpus": len(hypotheses), "queries": {split: len(found) for split, found in held_out.items()},
                "qrels": {split: len(judged) for split, judged in qrels.items()}, "train_pairs": len(pairs),
                "train_pairs_left_out": len(all_pairs) - len(pairs), "train_triplets": len(triplets)}
    return {"corpus": {document_id[text]: text for text in hypotheses}, "queries": queries, "qrels": qrels,
            "pairs": pairs, "triplets": triplets, "manifest": manifest}


def write(built: dict, output: Path) -> None:
    """Write the folder (refusing a non-empty one: nothing is overwritten)."""
    if output.exists() and any(output.iterdir()):
        raise SystemExit(f"error: {output}: exists and is not empty; give a new folder")
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


# ------------------------------------------------------------------------------------------------ the runs


def folder(args: argparse.Namespace) -> Path:
    return Path(args.runs) / "retrieval" / "nli-retrieval"


def prepare(args: argparse.Namespace) -> argparse.Namespace:
    """Build the BEIR folder once (a sitting that finds its manifest reuses it)."""
    if not (folder(args) / "manifest.json").exists():
        write(build(Path(args.data_root), **SPLIT), folder(args))
    return args


def command(arguments: list[str]) -> None:
    """One contrastext command; its output goes to the terminal; a failure stops the experiment."""
    print("$ contrastext " + " ".join(arguments), flush=True)
    subprocess.run([sys.executable, "-m", "contrastext", *arguments], check=True, cwd=REPO)


def evaluate(model: str, data: Path, json_path: Path) -> dict:
    """``contrastext eval --tasks ir:FOLDER@test --json``: the test metrics (×100, as eval writes them)."""
    command(["eval", "-m", model, "--tasks", f"ir:{data}@test", "--json", str(json_path)])
    scores = json.loads(json_path.read_text(encoding="utf-8"))["tasks"][data.name]
    return {key: scores[key] for key in METRICS} | {"n": scores["n"], "corpus": scores["corpus"]}


def evaluate_start(run, args) -> tuple[dict, dict]:
    """The setting ``before``: the starting model on the test queries (deterministic: one run); the folder's
    manifest goes with its record."""
    run.output_dir.mkdir(parents=True, exist_ok=True)
    metrics = evaluate(MODEL, folder(args), run.output_dir / "test.json")
    shutil.rmtree(run.output_dir)
    return metrics, {"manifest": json.loads((folder(args) / "manifest.json").read_text(encoding="utf-8"))}


def mine(run, args) -> tuple[dict, dict]:
    """The setting ``mined-negatives``: ``contrastext mine``, one hard negative per training pair, with
    sentence-transformers' documented filter; the mined file is the ``mined`` arm's training data."""
    mined = folder(args) / "train_mined.csv"
    mined.unlink(missing_ok=True)
    command(["mine", "-m", MODEL, "-i", str(folder(args) / "train_pairs.csv"), "-o", str(mined), *MINE_OPTIONS])
    return {"rows": sum(1 for _ in mined.open(encoding="utf-8")) - 1}, {"options": list(MINE_OPTIONS)}


def train_arm(run, args) -> tuple[dict, dict]:
    """An arm: ``contrastext train retrieval`` on the grid's training file with the grid's extra overrides, then
    its final weights on the test queries; seconds per step from its log."""
    data, output = folder(args) / run.point["train"], run.output_dir
    if not data.exists():
        raise FileNotFoundError(f"error: {data}: missing (the mined file is written by the mined-negatives run)")
    shutil.rmtree(output, ignore_errors=True)  # a run folder of an interrupted sitting: started again
    sets = [f"data.path={data}", f"seed={run.seed}", "eval.tasks=[]", f"train.epochs={run.sizes['epochs']}",
            f"train.batch_size={run.sizes['batch_size']}", "train.progress_bar=false", *run.point["extra"]]
    command(["train", "retrieval", "-o", str(output), *(part for item in sets for part in ("--set", item))])
    resolved = yaml.safe_load((output / "config.yaml").read_text(encoding="utf-8"))
    metrics = evaluate(str(output / "final" / "encoder"), folder(args), output / "test.json") | training_cost(output)
    if run.name == ENCODED_ARM and run.seed == list(args.seeds)[-1]:
        command(["encode", "-m", str(output / "final" / "encoder"), "-i", str(folder(args) / "corpus.txt"),
                 "-o", str(folder(args).parent / "corpus_embeddings.npy")])
    shutil.rmtree(output)
    return metrics, {"resolved_config": resolved, "set": sets}


def training_cost(output: Path) -> dict:
    """Seconds per optimiser step (the batch over the median logged samples/s) and what the run reported of its
    negatives (the bank's fill and refresh times)."""
    log = [json.loads(line) for line in (output / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    config = yaml.safe_load((output / "config.yaml").read_text(encoding="utf-8"))
    rates = sorted(record["samples_per_s"] for record in log if record.get("samples_per_s"))
    report = json.loads((output / "metrics.json").read_text(encoding="utf-8")).get("report", {})
    measured = {"steps": max((record["step"] for record in log if "step" in record), default=0)}
    if rates:
        measured["s_per_step"] = config["train"]["batch_size"] / rates[len(rates) // 2]
    if "negatives" in report:
        measured["negatives_report"] = report["negatives"]
    return measured


def context(page: dict) -> dict:
    """The folder's manifest: the ``data`` record of the first sitting, else the ``before`` run's provenance."""
    store = page["store"]
    found = store.get("data", 0)
    before = (store.get("before", 0) or {}).get("provenance") or {}
    return {"manifest": found["metrics"] if found else before.get("manifest") or {}}


def main(argv: list[str] | None = None) -> int:
    """Build the folder alone (``--output``: a new folder)."""
    parser = argparse.ArgumentParser(description="the BEIR folder of the retrieval experiment, alone")
    parser.add_argument("--data-root", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--output", type=Path, required=True, help="a new folder")
    for key, value in SPLIT.items():
        parser.add_argument("--" + key.replace("_", "-"), type=int, default=value)
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
