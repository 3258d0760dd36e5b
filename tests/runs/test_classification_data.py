"""The shared fine-tuning ground: task data (limit, few-shot, label noise, holdout, validation / test split),
collate, evaluator."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from scipy.stats import spearmanr

from contrastext.data.examples import Example, IndexedExample
from contrastext.errors import ConfigError
from contrastext.evaluation.evaluators import EvalSet, make_evaluator
from contrastext.methods.classification import ClassificationMethod
from contrastext.runs.classification import ClassificationArgs
from contrastext.runs.data import load_classification_data, split_validation_test, task_and_splits
from contrastext.training.config import load_config

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "scl.yaml"


def config_for(tmp_path, *overrides: str):
    """scl.yaml as a plain classification config: its data.few_shot_sampling cleared, so the sampling is the
    ``few_shot_sampling`` argument (the recipe's default) unless an override sets it."""
    return load_config(RECIPE, [f"output_dir={tmp_path}", "data.few_shot_sampling=null", *overrides])


class _Plain(ClassificationMethod):
    def forward(self, batch):
        return {"task": self.task_loss(self.head(self.encode_batch(batch).pooled), batch["labels"])}


@pytest.fixture(scope="module")
def encoder(minilm_path):
    from contrastext.models.encoder import TextEncoder

    return TextEncoder.from_pretrained(minilm_path, pooling="cls", max_seq_length=32)


def test_few_shot_draw_of_n_in_total_follows_the_training_label_distribution(tmp_path, data_root):
    """The recipe's N = 20 on SST-2 train (29,780 negative, 37,569 positive): quotas 8.84 and 11.16 -> 9 + 11."""
    config = config_for(tmp_path, "eval.limit=50")
    assert config.data.few_shot == 20
    data = load_classification_data(config, ClassificationArgs(), data_root, seed=4, few_shot_sampling="label_distribution")
    assert Counter(example.label for example in data.train) == {0: 9, 1: 11}
    assert data.description["train_label_counts"] == {"0": 9, "1": 11}
    assert data.description["few_shot_sampling"] == "label_distribution"
    with pytest.raises(ConfigError, match="few_shot_sampling"):
        load_classification_data(config, ClassificationArgs(), data_root, seed=4, few_shot_sampling="balanced")


def test_few_shot_per_class_draw_is_balanced_indexed_and_seeded(tmp_path, data_root):
    config = config_for(tmp_path, "data.limit=400", "data.few_shot=6", "eval.limit=50")
    args = ClassificationArgs()
    first = load_classification_data(config, args, data_root, seed=1)
    again = load_classification_data(config, args, data_root, seed=1)
    other = load_classification_data(config, args, data_root, seed=2)
    assert first.description["few_shot_sampling"] == "per_class"  # the default of the other recipes
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


def test_limit_keeps_the_first_rows_or_a_seeded_random_draw_in_file_order(tmp_path, data_root):
    def train(*overrides):
        config = config_for(tmp_path, "data.few_shot=null", *overrides)
        return [e.source for e in load_classification_data(config, ClassificationArgs(), data_root, seed=1).train]

    everything = train()  # each row's source (file and line): SST-2 repeats some sentences
    position = {source: i for i, source in enumerate(everything)}
    assert len(position) == len(everything)
    assert train("data.limit=50") == everything[:50]  # the default: the file's first rows
    drawn = train("data.limit=50", "data.limit_rows=random")
    assert len(drawn) == len(set(drawn)) == 50 and drawn != everything[:50]
    assert [position[source] for source in drawn] == sorted(position[source] for source in drawn)  # file order
    assert max(position[source] for source in drawn) > 1000  # from the whole file, not its head
    assert drawn == train("data.limit=50", "data.limit_rows=random")  # seeded
    assert drawn != train("data.limit=50", "data.limit_rows=random", "seed=43")
    with pytest.raises(Exception, match="limit_rows"):
        config_for(tmp_path, "data.limit_rows=shuffled")


def test_validation_and_test_split_dev_stratified_disjoint_and_seeded(tmp_path, data_root):
    """Gunel et al. §4.1: test = half of the GLUE dev set, validation ~500 rows, both following dev's label
    distribution. SST-2 dev (428 negative, 444 positive): test 214 + 222, validation the other 436 rows."""
    config = config_for(tmp_path, "data.limit=100", "data.few_shot=null")
    data = load_classification_data(config, ClassificationArgs(), data_root, seed=1)
    dev = list(data.eval)
    split = split_validation_test(data, validation_size=500, test_share=0.5, seed=0)
    assert Counter(e.label for e in split.test) == {0: 214, 1: 222}
    assert Counter(e.label for e in split.eval) == {0: 214, 1: 222}
    sources = lambda rows: {e.source for e in rows}  # noqa: E731
    assert len(sources(split.eval)) == 436 and len(sources(split.test)) == 436
    assert not sources(split.eval) & sources(split.test)
    assert sources(split.eval) | sources(split.test) == sources(dev)
    assert (split.eval_set.prefix, split.test_set.prefix) == ("sst2_validation", "sst2_test")
    assert split.description["n_validation"] == 436 and split.description["n_test"] == 436
    assert split.train == data.train

    other_draw = load_classification_data(config, ClassificationArgs(), data_root, seed=2)
    same = split_validation_test(other_draw, validation_size=500, test_share=0.5, seed=0)
    assert [e.source for e in same.test] == [e.source for e in split.test]  # one split for every draw
    reseeded = split_validation_test(data, validation_size=500, test_share=0.5, seed=1)
    assert sources(reseeded.test) != sources(split.test)

    small = split_validation_test(data, validation_size=100, test_share=0.5, seed=0)
    assert Counter(e.label for e in small.eval) == {0: 49, 1: 51}  # quotas 49.08, 50.92 of the other half
    assert not sources(small.eval) & sources(small.test) and sources(small.test) == sources(split.test)
    with pytest.raises(ConfigError, match="test_share"):
        split_validation_test(data, validation_size=500, test_share=0.9999, seed=0)


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
    method.eval()  # no dropout: the loss is a function of the batch
    loss = method(batch)["task"]
    with torch.no_grad():
        logits = method.head(encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).pooled)
    expected = -torch.log_softmax(logits, dim=1)[torch.arange(2), torch.tensor([1, 0])].mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


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
    predicted = regression.predict(pairs, batch_size=8, task="stsb")
    expected = 100 * spearmanr(predicted, [example.label for example in pairs]).statistic
    assert scores["score"] == scores["stsb_dev_spearman"] == pytest.approx(expected)
