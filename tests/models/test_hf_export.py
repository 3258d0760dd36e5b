"""Export of encoder + head as a Hugging Face sequence-classification folder: exact where it claims to be.

Each export is loaded back with ``transformers.pipeline("text-classification")`` (no contrastext code) and must
give our model's predictions, with probabilities within 1e-5: for [CLS] pooling (the ELECTRA route), BERT's
pooler (BertForSequenceClassification), pairs, regression, and a tiny SCL run on real SST-2 rows.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, pipeline

from contrastext.data.examples import Example
from contrastext.data.tasks import get_task
from contrastext.errors import ConfigError, ContrastextError, MissingDataError
from contrastext.methods.classification import FineTuneMethod
from contrastext.methods.scl import SCLMethod
from contrastext.models.encoder import TextEncoder
from contrastext.models.hf_export import export_classifier, is_classifier_folder, load_classifier
from contrastext.runs.registry import get_recipe
from contrastext.runs.scl import build, load_data
from contrastext.runs.stages import run_training
from tests.runs.recipe_runs import recipe_config, train_overrides

SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
LONG = " ".join(["a remarkably long review that keeps going"] * 12)
TEXTS = ["a fine, moving film", "dull.", "the worst plot in years, and the acting is no better", LONG]
PAIRS = ["a good film", "a bad film", "nothing like the other one", "short"]


def tiny_encoder(minilm_path: str, pooling: str, model_type: str = "bert", seed: int = 0) -> TextEncoder:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return TextEncoder.from_config({**SHAPE, "model_type": model_type}, minilm_path, pooling=pooling,
                                       max_seq_length=16).eval()


def method_for(encoder: TextEncoder, task_name: str, seed: int = 1) -> FineTuneMethod:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        method = FineTuneMethod(encoder, get_task(task_name)).eval()
        torch.nn.init.normal_(method.head.linear.weight, std=0.5)  # logits far from uniform
    return method


def our_logits(method: FineTuneMethod, examples: list[Example]) -> np.ndarray:
    with torch.no_grad():
        logits = method.head(method.encode_batch(method.tokenize(examples)).pooled).float()
    return (logits.unsqueeze(-1) if logits.dim() == 1 else logits).numpy()


def pipeline_scores(folder, inputs, **options) -> list[list[dict]]:
    classify = pipeline("text-classification", model=str(folder), device="cpu")
    return classify(inputs, truncation=True, top_k=None, **options)


def by_label(scores: list[dict], names: list[str]) -> np.ndarray:
    table = {entry["label"]: entry["score"] for entry in scores}
    return np.asarray([table[name] for name in names])


@pytest.mark.parametrize(
    ("pooling", "model_type", "route"),
    [("cls", "bert", "ElectraForSequenceClassification"), ("cls_before_pooler", "bert", "ElectraForSequenceClassification"),
     ("pooler", "bert", "BertForSequenceClassification"), ("cls", "electra", "ElectraForSequenceClassification")],
)
def test_the_pipeline_predicts_what_our_model_predicts(tmp_path, minilm_path, pooling, model_type, route):
    method = method_for(tiny_encoder(minilm_path, pooling, model_type), "sst2")
    folder = method.export_classifier(tmp_path / "classifier", label_names=["negative", "positive"])
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == [route] and config["id2label"] == {"0": "negative", "1": "positive"}
    assert config["problem_type"] == "single_label_classification"

    examples = [Example((text,), 0) for text in TEXTS]
    expected = torch.softmax(torch.from_numpy(our_logits(method, examples)), dim=-1).numpy()
    predicted = method.predict(examples)
    scores = pipeline_scores(folder, TEXTS)
    got = np.stack([by_label(row, ["negative", "positive"]) for row in scores])
    assert np.abs(got - expected).max() < 1e-5
    assert [max(row, key=lambda entry: entry["score"])["label"] for row in scores] == [
        ["negative", "positive"][int(label)] for label in predicted
    ]
    # the longest text is cut at the model's 16 tokens, as our own tokenisation cuts it
    assert len(method.encoder.tokenizer(LONG)["input_ids"]) > 16


def test_pairs_are_encoded_together_as_in_fine_tuning(tmp_path, minilm_path):
    method = method_for(tiny_encoder(minilm_path, "cls"), "mrpc")
    folder = method.export_classifier(tmp_path / "classifier", label_names=["not_paraphrase", "paraphrase"])
    examples = [Example((a, b), 0) for a, b in zip(TEXTS, PAIRS, strict=True)]
    expected = torch.softmax(torch.from_numpy(our_logits(method, examples)), dim=-1).numpy()
    inputs = [{"text": a, "text_pair": b} for a, b in zip(TEXTS, PAIRS, strict=True)]
    got = np.stack([by_label(row, ["not_paraphrase", "paraphrase"]) for row in pipeline_scores(folder, inputs)])
    assert np.abs(got - expected).max() < 1e-5
    assert json.loads((folder / "contrastext_config.json").read_text())["classifier"]["text_pair"] is True


@pytest.mark.parametrize("pooling", ["cls", "pooler"])
def test_a_regression_head_exports_one_raw_score(tmp_path, minilm_path, pooling):
    method = method_for(tiny_encoder(minilm_path, pooling), "stsb")
    folder = method.export_classifier(tmp_path / "classifier")
    config = json.loads((folder / "config.json").read_text())
    assert config["problem_type"] == "regression" and len(config["id2label"]) == 1
    examples = [Example((a, b), 2.5) for a, b in zip(TEXTS, PAIRS, strict=True)]
    expected = method.predict(examples)
    inputs = [{"text": a, "text_pair": b} for a, b in zip(TEXTS, PAIRS, strict=True)]
    got = np.asarray([row[0]["score"] for row in pipeline_scores(folder, inputs)])  # no sigmoid: regression
    assert np.abs(got - expected).max() < 1e-5


def test_the_export_is_also_the_encoder(tmp_path, minilm_path):
    """contrastext_config.json keeps pooling and length: TextEncoder.load gives the same vectors back."""
    for pooling in ("cls", "pooler"):
        encoder = tiny_encoder(minilm_path, pooling)
        folder = method_for(encoder, "sst2").export_classifier(tmp_path / pooling)
        loaded = TextEncoder.load(folder)
        assert (loaded.pooling, loaded.max_seq_length) == (pooling, 16)
        np.testing.assert_allclose(loaded.encode(TEXTS), encoder.encode(TEXTS), atol=1e-5)


def test_load_classifier_reads_labels_and_matches_the_pipeline(tmp_path, minilm_path):
    method = method_for(tiny_encoder(minilm_path, "cls"), "sst5")
    names = ["very negative", "negative", "neutral", "positive", "very positive"]
    folder = method.export_classifier(tmp_path / "classifier", label_names=names)
    classifier = load_classifier(folder)
    assert classifier.label_names == names and classifier.function == "softmax" and classifier.text_pair is False
    expected = np.stack([by_label(row, names) for row in pipeline_scores(folder, TEXTS)])
    assert np.abs(classifier.scores(TEXTS, batch_size=3) - expected).max() < 1e-5
    assert list(classifier.predict([Example((t,), 0) for t in TEXTS])) == list(method.predict([Example((t,), 0) for t in TEXTS]))


def test_label_names_default_to_the_method_attribute_then_numbers(tmp_path, minilm_path):
    method = method_for(tiny_encoder(minilm_path, "cls"), "sst2")
    method.label_names = ["neg", "pos"]
    folder = method.export_classifier(tmp_path / "named")
    assert json.loads((folder / "config.json").read_text())["label2id"] == {"neg": 0, "pos": 1}
    method.label_names = []
    folder = method.export_classifier(tmp_path / "numbers")
    assert json.loads((folder / "config.json").read_text())["id2label"] == {"0": "0", "1": "1"}
    folder = method.export_classifier(tmp_path / "given", label_names=["bad", "good"])
    assert json.loads((folder / "config.json").read_text())["id2label"] == {"0": "bad", "1": "good"}


@pytest.mark.parametrize("pooling", ["mean", "max", "first_last_avg"])
def test_a_pooling_without_an_exact_equivalent_is_refused_and_nothing_is_written(tmp_path, minilm_path, pooling):
    method = method_for(tiny_encoder(minilm_path, pooling), "sst2")
    with pytest.raises(ConfigError, match=f"pooling '{pooling}'.*method_args.pooling=cls or pooler"):
        method.export_classifier(tmp_path / "classifier")
    assert not (tmp_path / "classifier").exists()


def scl_method_for(encoder: TextEncoder, task_name: str = "sst2") -> SCLMethod:
    """An SCL classifier with the paper's dense+tanh head, its weights drawn far from uniform logits."""
    with torch.random.fork_rng():
        torch.manual_seed(2)
        method = SCLMethod(encoder, get_task(task_name), lam=0.0 if task_name == "stsb" else 0.9).eval()
        torch.nn.init.normal_(method.head.dense.weight, std=0.5)
        torch.nn.init.normal_(method.head.out_proj.weight, std=0.5)
    return method


@pytest.mark.parametrize("pooling", ["cls", "cls_before_pooler"])
def test_a_dense_tanh_head_exports_as_bert_with_the_head_in_the_pooler(tmp_path, minilm_path, pooling):
    """SCL's head: dense+tanh on [CLS] is BertForSequenceClassification's pooler, exactly (classes and a score)."""
    method = scl_method_for(tiny_encoder(minilm_path, pooling))
    assert method.head_kind == "dense_tanh"
    folder = method.export_classifier(tmp_path / "classifier", label_names=["negative", "positive"])
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert json.loads((folder / "contrastext_config.json").read_text())["classifier"]["route"] == "bert-dense-tanh"
    examples = [Example((text,), 0) for text in TEXTS]
    expected = torch.softmax(torch.from_numpy(our_logits(method, examples)), dim=-1).numpy()
    got = np.stack([by_label(row, ["negative", "positive"]) for row in pipeline_scores(folder, TEXTS)])
    assert np.abs(got - expected).max() < 1e-5

    regression = scl_method_for(tiny_encoder(minilm_path, pooling), "stsb")
    folder = regression.export_classifier(tmp_path / "regression")
    inputs = [{"text": a, "text_pair": b} for a, b in zip(TEXTS, PAIRS, strict=True)]
    expected = regression.predict([Example((a, b), 2.5) for a, b in zip(TEXTS, PAIRS, strict=True)])
    got = np.asarray([row[0]["score"] for row in pipeline_scores(folder, inputs)])
    assert np.abs(got - expected).max() < 1e-5


@pytest.mark.parametrize(("pooling", "model_type", "reason"), [("cls", "electra", "'electra' backbone"),
                                                             ("pooler", "bert", "pooling 'pooler'")])
def test_a_dense_tanh_head_without_an_exact_equivalent_is_refused(tmp_path, minilm_path, pooling, model_type, reason):
    method = scl_method_for(tiny_encoder(minilm_path, pooling, model_type))
    with pytest.raises(ConfigError, match=f"dense\\+tanh head \\(method_args.head=dense_tanh\\).*{reason}"):
        method.export_classifier(tmp_path / "classifier")
    assert not (tmp_path / "classifier").exists()
    linear = SCLMethod(method.encoder, get_task("sst2"), head="linear")  # the linear head still exports there
    assert linear.export_classifier(tmp_path / "linear").is_dir()


def test_a_projection_kept_at_inference_is_refused(tmp_path, minilm_path):
    encoder = tiny_encoder(minilm_path, "cls")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        encoder = TextEncoder(encoder.backbone, encoder.tokenizer, pooling="cls", projection="mlp",
                              projection_at_inference=True)
    with pytest.raises(ConfigError, match="projection"):
        export_classifier(encoder, torch.nn.Linear(32, 2), tmp_path / "classifier")


def test_folders_that_are_not_classifiers_are_one_line_errors(tmp_path, minilm_path, tiny_bert_path):
    with pytest.raises(MissingDataError, match="not a folder"):
        load_classifier(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ContrastextError, match="no config.json"):
        load_classifier(tmp_path / "empty")
    assert not is_classifier_folder(tiny_bert_path)
    with pytest.raises(ContrastextError, match="not a sequence-classification model.*contrastext encode"):
        load_classifier(tiny_bert_path)


def test_a_tiny_scl_run_exports_a_classifier_that_the_pipeline_agrees_with(tmp_path, tiny_bert_path, data_root):
    """SCL on 300 SST-2 rows, 3 steps: <output_dir>/classifier holds the selected weights; the pipeline gives
    the method's predictions on the test rows, with its probabilities to 1e-5."""
    fast = [*train_overrides(max_steps=3, batch_size=8, lr="1e-3", warmup_ratio=0, eval_every=1),
            "data.max_length=32", "data.limit=300", "data.few_shot=16", "eval.limit=40"]
    config = recipe_config("scl", tmp_path, tiny_bert_path, *fast)
    args = get_recipe("scl").args_model.model_validate(config.method_args)
    bundle = build(config, args, data_root)
    summary = run_training(config, bundle)
    folder = tmp_path / "classifier"
    assert summary["classifier_dir"] == str(folder) and is_classifier_folder(folder)

    method = bundle.method  # holds the selected (best) weights after run_training
    test_rows = list(load_data(config, args, data_root).test) + [Example((LONG,), 0)]
    logits = our_logits(method, test_rows)
    expected = torch.softmax(torch.from_numpy(logits), dim=-1).numpy()
    names = json.loads((folder / "config.json").read_text())["id2label"]
    names = [names[str(index)] for index in range(len(names))]
    scores = pipeline_scores(folder, [row.texts[0] for row in test_rows])
    got = np.stack([by_label(row, names) for row in scores])
    assert np.abs(got - expected).max() < 1e-5
    predicted = method.predict(test_rows, task="sst2")
    assert [max(row, key=lambda entry: entry["score"])["label"] for row in scores] == [names[int(p)] for p in predicted]
    assert AutoModelForSequenceClassification.from_pretrained(folder).config.problem_type == "single_label_classification"


def test_multitask_exports_the_single_text_heads_that_have_an_exact_equivalent(tmp_path, minilm_path):
    from contrastext.methods.multitask import MultitaskMethod

    tasks = [get_task("minbert-sst"), get_task("minbert-sts")]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        method = MultitaskMethod(tiny_encoder(minilm_path, "pooler"), tasks, shared_layer=False).eval()
    exported, skipped = method.export_classifiers(tmp_path / "classifiers")
    assert list(exported) == ["minbert-sst"] and list(skipped) == ["minbert-sts"] and "pair" in skipped["minbert-sts"]
    id2label = json.loads((exported["minbert-sst"] / "config.json").read_text())["id2label"]
    names = [id2label[str(index)] for index in range(5)]
    examples = [Example((text,), 0) for text in TEXTS]
    scores = pipeline_scores(exported["minbert-sst"], TEXTS)
    predicted = method.predict(examples, task="minbert-sst")
    assert [max(row, key=lambda entry: entry["score"])["label"] for row in scores] == [names[int(p)] for p in predicted]
    with torch.no_grad():
        entry = method.tokenize_task("minbert-sst", examples)
        expected = torch.softmax(method.outputs("minbert-sst", entry), dim=-1).numpy()
    assert np.abs(np.stack([by_label(row, names) for row in scores]) - expected).max() < 1e-5

    with torch.random.fork_rng():
        torch.manual_seed(0)
        shared = MultitaskMethod(tiny_encoder(minilm_path, "pooler"), tasks).eval()
    exported, skipped = shared.export_classifiers(tmp_path / "shared")
    assert exported == {} and "shared_layer=false" in skipped["minbert-sst"]
