"""The shared fine-tuning ground: task data (limit, few-shot, label noise, holdout), collate, evaluator."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

from contrastext.data.examples import Example, IndexedExample
from contrastext.errors import ConfigError
from contrastext.evaluation.evaluators import EvalSet, make_evaluator
from contrastext.methods.classification import ClassificationArgs, ClassificationMethod
from contrastext.runs.data import load_classification_data, task_and_splits
from contrastext.training.config import load_config

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "scl.yaml"


def config_for(tmp_path, *overrides: str):
    return load_config(RECIPE, [f"output_dir={tmp_path}", *overrides])


class _Plain(ClassificationMethod):
    def forward(self, batch):
        return {"task": self.task_loss(self.head(self.encode_batch(batch).pooled), batch["labels"])}


@pytest.fixture(scope="module")
def encoder(minilm_path):
    from contrastext.models.encoder import TextEncoder

    return TextEncoder.from_pretrained(minilm_path, pooling="cls", max_seq_length=32)


def test_few_shot_draw_is_stratified_indexed_and_seeded(tmp_path, data_root):
    config = config_for(tmp_path, "data.limit=400", "data.few_shot=6", "eval.limit=50")
    args = ClassificationArgs()
    first = load_classification_data(config, args, data_root, seed=1)
    again = load_classification_data(config, args, data_root, seed=1)
    other = load_classification_data(config, args, data_root, seed=2)
    assert Counter(example.label for example in first.train) == {0: 6, 1: 6}
    assert [example.index for example in first.train] == list(range(12))
    assert all(isinstance(example, IndexedExample) for example in first.train)
    assert [e.texts for e in first.train] == [e.texts for e in again.train]
    assert [e.texts for e in first.train] != [e.texts for e in other.train]
    assert len(first.eval) == 50 and first.description["n_train"] == 12


def test_label_noise_flips_the_requested_share(tmp_path, data_root):
    config = config_for(tmp_path, "data.limit=200", "data.few_shot=null", "data.label_noise=0.25")
    clean_config = config_for(tmp_path, "data.limit=200", "data.few_shot=null")
    clean = load_classification_data(clean_config, ClassificationArgs(), data_root, seed=3)
    noisy = load_classification_data(config, ClassificationArgs(), data_root, seed=3)
    changed = sum(a.label != b.label for a, b in zip(clean.train, noisy.train, strict=True))
    assert changed == noisy.description["labels_flipped"] == 50
    assert [a.texts for a in clean.train] == [b.texts for b in noisy.train]


def test_holdout_splits_a_single_labelled_split(tmp_path, data_root):
    config = config_for(tmp_path, "data.task=qnli", "eval.tasks=[qnli:dev]", "data.few_shot=null")
    data = load_classification_data(config, ClassificationArgs(holdout=0.2), data_root, seed=0)
    assert len(data.eval) == round(0.2 * 5463) and len(data.train) == 5463 - len(data.eval)
    sources = {example.source for example in data.train}
    assert not sources & {example.source for example in data.eval}
    assert "holdout" in data.description["eval"]


def test_task_checks(tmp_path):
    with pytest.raises(ConfigError, match="same task"):
        task_and_splits(config_for(tmp_path, "eval.tasks=[mrpc:dev]"))
    with pytest.raises(ConfigError, match="kind 'sentences'"):
        task_and_splits(config_for(tmp_path, "data.task=wiki1m", "eval.tasks=[]"))
    task, train_split, eval_split = task_and_splits(config_for(tmp_path, "data.task=stsb", "eval.tasks=[]"))
    assert (task.name, train_split, eval_split) == ("stsb", "train", "dev")


def test_few_shot_on_regression_is_an_error(tmp_path, data_root):
    config = config_for(tmp_path, "data.task=stsb", "eval.tasks=[stsb:dev]", "data.few_shot=4")
    with pytest.raises(ConfigError, match="regression"):
        load_classification_data(config, ClassificationArgs(), data_root, seed=0)


def test_collate_pairs_labels_and_indices(encoder):
    from contrastext.data.tasks import get_task

    method = _Plain(encoder, get_task("mrpc"))
    examples = [
        IndexedExample(("a first sentence", "and its partner"), 1, "x:1", index=5),
        IndexedExample(("another one", "a paraphrase of it, longer"), 0, "x:2", index=9),
    ]
    batch = method.collate(examples)
    assert batch["labels"].dtype == torch.long and batch["labels"].tolist() == [1, 0]
    assert batch["indices"].tolist() == [5, 9]
    assert batch["token_type_ids"].max() == 1  # the second text is segment B
    sep = encoder.tokenizer.sep_token_id
    assert (batch["input_ids"][0] == sep).sum() == 2
    loss = method(batch)["task"]
    assert torch.isfinite(loss)


def test_evaluator_reports_the_task_metric(encoder):
    from contrastext.data.tasks import get_task

    method = _Plain(encoder, get_task("cola"))
    examples = [Example((f"sentence number {i} is here",), i % 2) for i in range(6)]
    result = make_evaluator([EvalSet(get_task("cola"), "dev", examples)], "head", batch_size=4)(method)
    assert set(result) == {"cola_dev_accuracy", "cola_dev_f1", "cola_dev_mcc", "cola_dev_score", "score"}
    assert result["score"] == result["cola_dev_mcc"] == result["cola_dev_score"]
    regression = _Plain(encoder, get_task("stsb"))
    pairs = [Example((f"a {i}", f"b {i} c"), float(i)) for i in range(5)]
    scores = make_evaluator([EvalSet(get_task("stsb"), "dev", pairs)], "head")(regression)
    assert scores["score"] == scores["stsb_dev_spearman"] and -100 <= scores["score"] <= 100
