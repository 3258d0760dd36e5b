"""The ``mnrl`` recipe end to end: a sentence-transformers model fine-tuned on the user's pairs, kept as it is.

Through the CLI on small pair files (CSV triplets, JSONL pairs), evaluated on the user's own STS and pairs
files; the saved model keeps the pooling, normalisation and max length and loads in sentence-transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from contrastext.models.encoder import TextEncoder
from contrastext.runs.mnrl import MNRLArgs
from contrastext.runs.registry import get_recipe
from tests.cli.cli_runs import run
from tests.runs.recipe_runs import read_log, recipe_config

pytestmark = pytest.mark.usefixtures("single_torch_thread")

MODEL_LENGTH = 128


@pytest.fixture(scope="module")
def st_model(make_st_model) -> str:
    """A tiny random BERT saved as a sentence-transformers folder: mean pooling, Normalize, max length 128."""
    return make_st_model(num_layers=2, max_seq_length=MODEL_LENGTH)


TOPICS = ["cats", "pizza", "rome", "guitars", "rain", "trains", "coffee", "chess", "gardens", "rivers", "bikes", "tea"]


def pair_file(tmp_path: Path, kind: str) -> Path:
    if kind == "csv":  # anchor, positive, hard negative: sentence-transformers' column order
        path = tmp_path / "pairs.csv"
        rows = [f"what about {t},a short text on {t},a text on {TOPICS[i - 1]}\n" for i, t in enumerate(TOPICS)]
        path.write_text("anchor,positive,negative\n" + "".join(rows))
    else:
        path = tmp_path / "pairs.jsonl"
        path.write_text("".join(json.dumps({"query": f"tell me about {t}", "answer": f"all about {t}"}) + "\n"
                                for t in TOPICS))  # fmt: skip
    return path


def eval_files(tmp_path: Path) -> tuple[Path, Path]:
    sts = tmp_path / "my_sts.csv"
    sts.write_text(
        "s1,s2,score\na cat sleeps,a cat is sleeping,4.8\na man cooks,the stock market fell,0.2\n"
        "kids play chess,children play a board game,3.9\nit rains,the sun is out,1.0\n"
    )
    held_out = tmp_path / "held_out.csv"
    held_out.write_text("anchor,positive\nabout cats,cats are pets\nabout rain,rain is water\nabout tea,tea is a drink\n")
    return sts, held_out


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_mnrl_trains_on_a_pair_file_and_keeps_the_model(kind, tmp_path, capsys, st_model):
    sts, held_out = eval_files(tmp_path)
    output = tmp_path / "run"
    sets = [
        f"model={st_model}", f"data.path={pair_file(tmp_path, kind)}", f"output_dir={output}",
        "train.max_steps=3", "train.epochs=null", "train.batch_size=4", "train.lr=1e-3", "train.eval_every=3",
        "train.save_every=null", "train.progress_bar=false", "train.log_every=1",
        f"eval.tasks=[sts:{sts},pairs:{held_out}]",
    ]  # fmt: skip
    code, out, err = run(["train", "mnrl", *[part for item in sets for part in ("--set", item)]], capsys)
    assert code == 0, err
    assert "model:" not in out  # nothing about the model changed

    records = read_log(output)
    assert [record["step"] for record in records if "loss/infonce" in record] == [1, 2, 3]
    metrics = json.loads((output / "metrics.json").read_text())["metrics"]
    assert {"my_sts_file_spearman", "held_out_file_mrr_at_10", "held_out_file_accuracy_at_1"} <= set(metrics)
    assert metrics["score"] == metrics["my_sts_file_spearman"]

    final = output / "final" / "encoder"
    trained, start = TextEncoder.load(final), TextEncoder.load(st_model)
    assert (trained.pooling, trained.normalize, trained.projection, trained.max_seq_length) == (
        "mean", True, None, MODEL_LENGTH
    )  # fmt: skip
    assert not torch.equal(trained.backbone.embeddings.word_embeddings.weight,
                           start.backbone.embeddings.word_embeddings.weight)  # fmt: skip
    from sentence_transformers import SentenceTransformer

    texts = ["a cat sleeps", "it rains in rome"]
    ours = trained.encode(texts)
    theirs = SentenceTransformer(str(final), device="cpu").encode(texts)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_the_loss_is_multiple_negatives_ranking_with_scale_20(tmp_path, st_model, data_root):
    config = recipe_config("mnrl", tmp_path, st_model, f"data.path={pair_file(tmp_path, 'csv')}", "eval.tasks=[]")
    spec = get_recipe("mnrl")
    args = config.method_args_as(spec.args_model)
    assert isinstance(args, MNRLArgs) and args.temperature == 0.05 and (args.pooling, args.mlp) == (None, None)
    method = spec.build(config, args, data_root).method
    generator = torch.Generator().manual_seed(0)
    anchors, positives, negatives = (torch.randn(4, 8, generator=generator) for _ in range(3))
    candidates = F.normalize(torch.cat([positives, negatives]), dim=-1)
    logits = 20.0 * F.normalize(anchors, dim=-1) @ candidates.T
    expected = F.cross_entropy(logits, torch.arange(4))
    torch.testing.assert_close(method.loss(anchors, positives, negatives), expected)


def test_max_seq_length_of_the_saved_model_can_be_asked_for(tmp_path, st_model, data_root, capsys):
    config = recipe_config(
        "mnrl", tmp_path, st_model, f"data.path={pair_file(tmp_path, 'csv')}", "eval.tasks=[]",
        "method_args.max_seq_length=64",
    )  # fmt: skip
    spec = get_recipe("mnrl")
    encoder = spec.build(config, config.method_args_as(spec.args_model), data_root).method.encoder
    assert (encoder.max_seq_length, encoder.train_max_length) == (64, 64)  # training never longer than the model
    assert "model: max_seq_length 128 -> 64" in capsys.readouterr().out
