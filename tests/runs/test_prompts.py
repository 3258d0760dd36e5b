"""``data.prompts``: put before the training texts per column, saved with the model, applied by sentence-transformers.

A run with prompts saves them in config_sentence_transformers.json; ``SentenceTransformer(folder)`` then encodes
with ``prompt_name`` exactly as our ``encode(prompt_name=)`` and ``contrastext encode --prompt-name`` do.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.models.encoder import TextEncoder
from contrastext.runs.prompts import column_of, prompted_examples, text_columns
from contrastext.runs.registry import get_recipe
from tests.cli.cli_runs import run
from tests.runs.recipe_runs import recipe_config

pytestmark = pytest.mark.usefixtures("single_torch_thread")

TOPICS = ["cats", "pizza", "rome", "guitars", "rain", "trains", "coffee", "chess"]
TEXTS = ["what about cats", "a long text on trains and rivers"]


@pytest.fixture(scope="module")
def st_model(make_st_model) -> str:
    """A tiny random BERT (one layer) saved as a sentence-transformers folder (mean pooling, Normalize)."""
    return make_st_model(num_layers=1, max_seq_length=64)


def pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"query": f"about {t}", "passage": f"a text on {t}"}) + "\n" for t in TOPICS))
    return path


def train(tmp_path: Path, model: str, capsys, *sets: str, recipe: str = "mnrl") -> tuple[int, str, str]:
    settings = [
        f"model={model}", f"data.path={pairs(tmp_path)}", f"output_dir={tmp_path / 'run'}", "train.max_steps=2",
        "train.epochs=null", "train.batch_size=4", "train.save_every=null", "train.progress_bar=false",
        "train.eval_every=null", "eval.tasks=[]", *sets,
    ]  # fmt: skip
    return run(["train", recipe, *[part for item in settings for part in ("--set", item)]], capsys)


def test_column_prompts_are_saved_and_sentence_transformers_applies_them_as_we_do(tmp_path, capsys, st_model):
    from sentence_transformers import SentenceTransformer

    code, _, err = train(tmp_path, st_model, capsys, "data.prompts={query: 'query: ', passage: 'passage: '}")
    assert code == 0, err
    final = tmp_path / "run" / "final" / "encoder"
    saved = json.loads((final / "config_sentence_transformers.json").read_text())
    assert saved["prompts"] == {"query": "query: ", "passage": "passage: "} and saved["default_prompt_name"] is None

    ours = TextEncoder.load(final)
    theirs = SentenceTransformer(str(final), device="cpu")
    for name in ("query", "passage"):
        expected = theirs.encode(TEXTS, prompt_name=name)
        np.testing.assert_allclose(ours.encode(TEXTS, prompt_name=name), expected, atol=1e-5)
        np.testing.assert_allclose(ours.encode([saved["prompts"][name] + t for t in TEXTS]), expected, atol=1e-5)
    np.testing.assert_allclose(ours.encode(TEXTS), theirs.encode(TEXTS), atol=1e-5)  # no default: no prompt

    texts, output = tmp_path / "texts.txt", tmp_path / "q.npy"
    texts.write_text("".join(t + "\n" for t in TEXTS))
    code, _, err = run(["encode", "-m", str(final), "-i", str(texts), "-o", str(output), "--prompt-name", "query",
                        "--no-progress"], capsys)  # fmt: skip
    assert code == 0, err
    np.testing.assert_allclose(np.load(output), theirs.encode(TEXTS, prompt_name="query"), atol=1e-5)


def test_one_prompt_for_every_column_is_the_saved_default(tmp_path, capsys, st_model):
    from sentence_transformers import SentenceTransformer

    code, _, err = train(tmp_path, st_model, capsys, "data.prompts='search: '")
    assert code == 0, err
    final = tmp_path / "run" / "final" / "encoder"
    saved = json.loads((final / "config_sentence_transformers.json").read_text())
    assert (saved["prompts"], saved["default_prompt_name"]) == ({"default": "search: "}, "default")
    ours, theirs = TextEncoder.load(final), SentenceTransformer(str(final), device="cpu")
    np.testing.assert_allclose(ours.encode(TEXTS), theirs.encode(TEXTS), atol=1e-5)  # the default applies
    np.testing.assert_allclose(ours.encode(TEXTS), ours.encode(TEXTS, prompt="search: "), atol=1e-6)
    np.testing.assert_allclose(ours.encode(TEXTS, prompt=""), theirs.encode(TEXTS, prompt=""), atol=1e-5)


def test_the_training_texts_carry_their_columns_prompt(tmp_path, st_model, data_root):
    config = recipe_config("mnrl", tmp_path, st_model, f"data.path={pairs(tmp_path)}", "eval.tasks=[]",
                           "data.prompts={query: 'q: '}")  # fmt: skip
    spec = get_recipe("mnrl")
    bundle = spec.build(config, config.method_args_as(spec.args_model), data_root)
    assert bundle.train_examples[0].texts == ("q: about cats", "a text on cats")  # passage: no prompt
    assert bundle.method.encoder.prompts == {"query": "q: "}


def test_a_key_naming_no_text_column_is_an_error_line(tmp_path, capsys, st_model):
    code, _, err = train(tmp_path, st_model, capsys, "data.prompts={question: 'q: '}")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "data.prompts.question: not a text column of" in err and "text columns: query, passage" in err


def test_a_recipe_that_reads_no_prompts_refuses_them(tmp_path, capsys, st_model):
    code, _, err = train(tmp_path, st_model, capsys, "data.prompts='x: '", recipe="scl")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "data.prompts: scl does not read prompts; the recipes that do: gd, mnrl, simcse-sup, simcse-unsup" in err


@pytest.mark.parametrize(
    ("description", "texts", "expected"),
    [
        ({"columns": ["q", "p", "negs"], "ntuples": {}}, ("a", "b", "n1", "n2"), ("Q a", "P b", "N n1", "N n2")),
        ({"columns": ["premise", "hypothesis", "label"], "nli": {}}, ("a", "b", "c"), ("Q a", "P b", "P c")),
        ({"train": "nli-triplets:train"}, ("a", "b", "c"), ("T a", "R b", "N c")),
        ({"train": "wiki1m:train"}, ("a",), ("T a",)),
    ],
)  # fmt: skip
def test_each_text_takes_its_columns_prompt(tmp_path, description, texts, expected):
    names = {"q": "Q ", "p": "P ", "negs": "N ", "premise": "Q ", "hypothesis": "P ", "text": "T ", "pair": "R ",
             "negative": "N "}  # fmt: skip
    columns = text_columns(description)
    keys = {column_of(i, columns) for i in range(len(texts))}
    config = recipe_config("mnrl", tmp_path, "unused", "data.prompts={" + ", ".join(f"{k}: '{names[k]}'" for k in keys)
                           + "}")  # fmt: skip
    (prompted,) = prompted_examples(config, [Example(texts)], description, "here")
    assert prompted.texts == expected


def test_registry_data_names_its_texts_by_role(tmp_path):
    config = recipe_config("mnrl", tmp_path, "unused", "data.prompts={anchor: 'x'}")
    with pytest.raises(ConfigError, match="data.prompts.anchor: not a text column of nli-triplets:train; its texts "
                                          r"\(no column names: by role\): text, pair, negative"):  # fmt: skip
        prompted_examples(config, [Example(("a", "b", "c"))], {"train": "nli-triplets:train"}, "here")
