"""Retrieval's hook (experiments/specs/retrieval.yaml): the BEIR folder built from the shared SNLI triplets
(``prepare``: ``contrastext nli-to-beir`` on ``nli/snli_devtest_for_simcse.csv``, contrastext/data/nli_retrieval.py;
docs/RETRIEVAL.md, "The data") in ``<runs>/retrieval/nli-retrieval``, and the four commands a user runs, as
docs/RETRIEVAL.md gives them (mine -> train -> eval ir -> encode), as the runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

SOURCE = Path("nli") / "snli_devtest_for_simcse.csv"
SPLIT = {"seed": 0, "test_queries": 1000, "dev_queries": 500}
MODEL = "bundled:all-MiniLM-L6-v2"  # the start, the miner's model and the retrieval recipe's
METRICS = ("cosine_ndcg@10", "cosine_mrr@10", "cosine_recall@100", "cosine_map@100")
MINE_OPTIONS = ("--num-negatives", "1", "--range-min", "10", "--range-max", "50", "--max-score", "0.8",
                "--relative-margin", "0.05", "--sampling-strategy", "random")
ENCODED_ARM = "mined"  # the workflow's last step, encode, runs once: the last seed of this arm
REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------ the runs


def folder(args: argparse.Namespace) -> Path:
    return Path(args.runs) / "retrieval" / "nli-retrieval"


def prepare(args: argparse.Namespace) -> argparse.Namespace:
    """Build the BEIR folder once (a sitting that finds its manifest reuses it): ``contrastext nli-to-beir``'s."""
    from contrastext.data.nli_retrieval import build_nli_retrieval, write_beir_folder

    if not (folder(args) / "manifest.json").exists():
        write_beir_folder(build_nli_retrieval(Path(args.data_root) / SOURCE, name=str(SOURCE), **SPLIT), folder(args))
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
