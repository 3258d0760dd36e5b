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
from tests.runs.recipe_runs import recipe_config, train_overrides

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
    assert meta["base_model"] == "bundled:all-MiniLM-L6-v2" and meta["datasets"] == ["wiki1m"]
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
        assert meta["base_model"] == tiny_bert_path and "scl" in meta["tags"] and meta["datasets"] == ["sst2"]
        assert "**`scl`**" in text and "| task | sst2 |" in text and "| few_shot | 16 |" in text
        assert f"| sst2_validation_accuracy | {accuracy:.4g} |" in text
        assert "method_args.lam" in text and "Not evaluated yet" not in text
    best = (run / "best" / "encoder" / "README.md").read_text(encoding="utf-8")
    assert f"| sst2_test_accuracy | {test_accuracy:.4g} |" in best
    assert f"best weights (step {metrics['best_step']}" in best
    assert "last weights (step 3)" in (run / "final" / "encoder" / "README.md").read_text(encoding="utf-8")
    classifier = (run / "classifier" / "README.md").read_text(encoding="utf-8")
    assert 'pipeline("text-classification"' in classifier and "| 1 | positive |" in classifier
