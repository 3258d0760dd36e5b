"""Model cards (README.md): every saved encoder gets a basic one, a finished run rewrites best/ and final/ with the
recipe, the data and the metrics, and every exported classifier gets its own (how to load it with transformers)."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from contrastext.models.encoder import TextEncoder
from contrastext.models.model_card import classifier_card, encoder_card, encoder_facts
from contrastext.runs.registry import run_recipe
from tests.runs.recipe_runs import RECIPES, recipe_config, train_overrides

SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


def front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


@pytest.fixture(scope="module")
def tiny_encoder(minilm_path) -> TextEncoder:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return TextEncoder.from_config(SHAPE, minilm_path, pooling="cls", max_seq_length=24)


def test_a_saved_encoder_has_a_basic_card(tmp_path, tiny_encoder):
    folder = tiny_encoder.save(tmp_path / "encoder")
    text = (folder / "README.md").read_text(encoding="utf-8")
    meta = front_matter(text)
    assert meta["library_name"] == "sentence-transformers" and meta["pipeline_tag"] == "sentence-similarity"
    assert "sentence-transformers" in meta["tags"] and "metrics" not in meta
    assert "| Maximum sequence length | 24 tokens |" in text and "| Pooling | cls |" in text
    assert 'SentenceTransformer("path/to/this/folder")' in text and "TextEncoder.load" in text
    assert "Not evaluated yet" in text
    assert TextEncoder.load(folder).pooling == "cls"  # the card changes nothing the loaders read


def test_an_encoder_card_with_run_details_names_recipe_data_and_metrics(tiny_encoder):
    details = {
        "base_model": "bundled:all-MiniLM-L6-v2",
        "recipe": "simcse-unsup",
        "recipe_file": "recipes/simcse-unsup.yaml",
        "data": {"task": "wiki1m", "limit": 1000},
        "metrics": {"stsb_dev_spearman": 81.234, "score": 81.234, "note": "not a number"},
        "metrics_note": "Metrics of the best weights (step 40, selected by `score`).",
        "training": {"lr": 3e-5, "batch_size": 64},
    }
    text = encoder_card(encoder_facts(tiny_encoder), details)
    meta = front_matter(text)
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2" and meta["datasets"] == ["wiki1m"]
    assert meta["metrics"] == ["score", "stsb_dev_spearman"] and "simcse-unsup" in meta["tags"]
    assert "**`simcse-unsup`**" in text and "docs/methods/simcse-unsup.md" in text
    assert "| stsb_dev_spearman | 81.23 |" in text and "| limit | 1000 |" in text and "| lr | 3e-05 |" in text
    assert "selected by `score`" in text and "Not evaluated yet" not in text


def test_a_pooling_sentence_transformers_cannot_reproduce_is_flagged(minilm_path):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        encoder = TextEncoder.from_config(SHAPE, minilm_path, pooling="pooler")
    assert "has no exact sentence-transformers mode" in encoder_card(encoder_facts(encoder))


def test_a_classifier_card_shows_how_to_load_it(tmp_path):
    metadata = {"task": "mrpc", "labels": ["not_paraphrase", "paraphrase"], "problem_type": "single_label_classification",
                "text_pair": True, "route": "electra-cls", "hf_class": "ElectraForSequenceClassification"}
    text = classifier_card(metadata, {"recipe": "reclaim", "metrics": {"mrpc_dev_accuracy": 70.0}}, max_length=64)
    meta = front_matter(text)
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-classification"
    assert 'pipeline("text-classification", model="path/to/this/folder")' in text and '"text_pair"' in text
    assert "| 1 | paraphrase |" in text and "GELU(u) - GELU(-u) = u" in text and "64 tokens" in text
    assert "| mrpc_dev_accuracy | 70 |" in text and "contrastext predict" in text


def test_a_finished_run_rewrites_its_cards_with_the_recipe_and_metrics(tmp_path, tiny_bert_path, data_root):
    fast = [*train_overrides(max_steps=3, batch_size=8, lr="1e-3", warmup_ratio=0, eval_every=1),
            "data.max_length=32", "data.limit=300", "data.few_shot=16", "eval.limit=40", "method_args.seeds=[1]"]
    run_recipe(recipe_config("scl", tmp_path, tiny_bert_path, *fast), data_root=data_root)
    run = tmp_path / "seed-1"
    metrics = json.loads((run / "metrics.json").read_text())
    accuracy = metrics["metrics"]["sst2_validation_accuracy"]
    test_accuracy = metrics["report"]["test_metrics"]["sst2_test_accuracy"]
    for folder in (run / "best" / "encoder", run / "final" / "encoder", run / "classifier"):
        text = (folder / "README.md").read_text(encoding="utf-8")
        meta = front_matter(text)
        assert "base_model" not in meta  # a local folder that records no hub id: no base_model, never a path
        assert tiny_bert_path not in text and str(tmp_path) not in text and str(RECIPES) not in text
        assert "Recipe file: `recipes/scl.yaml`." in text
        assert "scl" in meta["tags"] and meta["datasets"] == ["sst2"]
        assert "**`scl`**" in text and "| task | sst2 |" in text and "| few_shot | 16 |" in text
        assert f"| sst2_validation_accuracy | {accuracy:.4g} |" in text
        assert "method_args.lam" in text and "Not evaluated yet" not in text
    best = (run / "best" / "encoder" / "README.md").read_text(encoding="utf-8")
    assert f"| sst2_test_accuracy | {test_accuracy:.4g} |" in best
    assert f"best weights (step {metrics['best_step']}" in best
    assert "last weights (step 3)" in (run / "final" / "encoder" / "README.md").read_text(encoding="utf-8")
    classifier = (run / "classifier" / "README.md").read_text(encoding="utf-8")
    assert 'pipeline("text-classification"' in classifier and "| 1 | positive |" in classifier


# ---------------------------------------------------------------------------------------------------------
# issue 22, item 6: a hub id for base_model, no local path, one length


def test_base_model_is_a_hub_id_or_absent(tmp_path, tiny_encoder, minilm_path):
    facts = encoder_facts(tiny_encoder)
    for given in ("bundled:all-MiniLM-L6-v2", minilm_path):  # the name, and the folder it resolves to
        meta = front_matter(encoder_card(facts, {"base_model": given, "recipe": "mnrl"}))
        assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert front_matter(encoder_card(facts, {"base_model": "bert-base-uncased"}))["base_model"] == "bert-base-uncased"
    recorded = tmp_path / "recorded"  # a local folder whose own card names its hub id
    recorded.mkdir()
    (recorded / "README.md").write_text("---\nbase_model: google-bert/bert-base-uncased\n---\n# x\n")
    assert front_matter(encoder_card(facts, {"base_model": str(recorded)}))["base_model"] == "google-bert/bert-base-uncased"
    cached = tmp_path / "hub" / "models--owner--some-model" / "snapshots" / "abc123"  # the Hugging Face cache
    cached.mkdir(parents=True)
    assert front_matter(encoder_card(facts, {"base_model": str(cached)}))["base_model"] == "owner/some-model"
    plain = tmp_path / "plain"  # records nothing: no base_model rather than a path
    plain.mkdir()
    text = encoder_card(facts, {"base_model": str(plain)})
    assert "base_model" not in front_matter(text) and str(plain) not in text
    metadata = {"task": "sst2", "labels": ["negative", "positive"], "hf_class": "BertForSequenceClassification"}
    classifier = classifier_card(metadata, {"base_model": minilm_path}, max_length=32)
    assert front_matter(classifier)["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert minilm_path not in classifier


def test_a_card_holds_no_absolute_local_path(tmp_path, tiny_encoder):
    own = tmp_path / "mine" / "my-recipe.yaml"
    details = {
        "recipe": "mnrl",
        "recipe_file": str(RECIPES / "mnrl.yaml"),
        "output_dir": str(tmp_path / "runs" / "mnrl-pairs"),
        "data": {"path": str(tmp_path / "data" / "pairs.csv"), "tasks": [f"sts:{tmp_path}/data/dev.csv", "stsb"]},
        "training": {"lr": 1e-5, "method_args.teacher": str(tmp_path / "teacher")},
    }
    text = encoder_card(encoder_facts(tiny_encoder), details)
    assert str(tmp_path) not in text and str(RECIPES.resolve()) not in text
    assert "Recipe file: `recipes/mnrl.yaml`." in text and "Run folder: `mnrl-pairs`" in text
    assert "| path | pairs.csv |" in text and "sts:dev.csv" in text and "| method_args.teacher | teacher |" in text
    assert front_matter(text)["datasets"] == ["sts:dev.csv", "stsb", "pairs.csv"]
    text = encoder_card(encoder_facts(tiny_encoder), {**details, "recipe_file": str(own)})
    assert "Recipe file: `my-recipe.yaml`." in text and str(own) not in text
    relative = encoder_card(encoder_facts(tiny_encoder), {**details, "recipe_file": "my-recipe.yaml"})
    assert "Recipe file: `my-recipe.yaml`." in relative


@pytest.mark.parametrize(
    ("training", "shown", "hidden"),
    [
        ({"max_steps": 30, "epochs": 1, "steps trained": 30}, ["| max_steps | 30 |", "| steps trained | 30 |"], "| epochs |"),
        ({"max_steps": 200, "epochs": 2, "steps trained": 52}, ["| epochs | 2 |", "| steps trained | 52 |"], "| max_steps |"),
        ({"max_steps": 30, "epochs": 1, "steps trained": 12, "length_from": "max_steps"}, ["| max_steps | 30 |"], "| epochs |"),
        ({"epochs": 1, "steps trained": 9}, ["| epochs | 1 |"], "| max_steps |"),
    ],
)
def test_the_card_shows_the_length_that_ran_once(tiny_encoder, training, shown, hidden):
    """``epochs: 1`` beside ``max_steps: 30`` said two lengths: the card keeps the one that bounded the run."""
    text = encoder_card(encoder_facts(tiny_encoder), {"recipe": "simcse-unsup", "training": training})
    assert all(row in text for row in shown) and hidden not in text and "length_from" not in text


def test_a_short_run_of_an_epochs_recipe_has_a_consistent_portable_card(tmp_path, tiny_bert_path, data_root):
    """simcse-unsup sets epochs: 1; --set train.max_steps=3 ran 3 steps: its card says so, without epochs."""
    fast = [*train_overrides(max_steps=3, batch_size=8, lr="1e-4"), "data.limit=64", "data.max_length=16",
            "eval.tasks=[]"]
    run_recipe(recipe_config("simcse-unsup", tmp_path / "run", tiny_bert_path, *fast), data_root=data_root)
    text = (tmp_path / "run" / "final" / "encoder" / "README.md").read_text(encoding="utf-8")
    assert "| max_steps | 3 |" in text and "| steps trained | 3 |" in text and "| epochs |" not in text
    assert str(tmp_path) not in text and tiny_bert_path not in text and str(RECIPES) not in text
    assert "Recipe file: `recipes/simcse-unsup.yaml`." in text and "Run folder: `run`" in text
