"""Degenerate training is refused or announced (issue 21, item 5): duplicate YAML keys, YAML bombs and deep
nesting, an empty seed list, an empty output path, an in-batch objective at batch 1.

Every refusal goes through ``contrastext train`` in-process (``tests.cli.cli_runs.run``): exit 2, exactly one
``error:`` line, no traceback, before any model loads (loading one fails the test), and the folder the command
was run over hashes the same before and after.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.cli.cli_runs import run

TOPICS = ["cats", "pizza", "rome", "guitars", "rain", "trains", "coffee", "chess"]


def tree_hash(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path -> sha256), folders included as ``-``."""
    hashes = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            hashes[os.path.relpath(os.path.join(root, name), folder)] = "-"
        for name in files:
            path = Path(root) / name
            hashes[os.path.relpath(path, folder)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def refused(argv: list[str], folder: Path, capsys, monkeypatch) -> str:
    """Run ``argv`` from ``folder``; assert the one-line refusal that changes nothing; return the line."""
    monkeypatch.chdir(folder)
    before = tree_hash(folder)
    code, _, err = run(argv, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    assert tree_hash(folder) == before
    return lines[0]


def sentences(folder: Path) -> Path:
    path = folder / "sentences.txt"
    path.write_text("".join(f"a short text on {topic}\n" for topic in TOPICS))
    return path


def pairs(folder: Path, negatives: bool = False) -> Path:
    path = folder / ("triplets.csv" if negatives else "pairs.csv")
    header = "anchor,positive,negative\n" if negatives else "anchor,positive\n"
    rows = [f"what about {t},a short text on {t}" + (f",a text on {TOPICS[i - 1]}" if negatives else "")
            for i, t in enumerate(TOPICS)]  # fmt: skip
    path.write_text(header + "\n".join(rows) + "\n")
    return path


# ----------------------------------------------------------------------------------------------- YAML


def recipe_file(folder: Path, extra: str) -> Path:
    data = sentences(folder)
    path = folder / "recipe.yaml"
    path.write_text(
        f"method: simcse-unsup\nmodel: /no/model/needed\noutput_dir: {folder / 'run'}\ndata:\n  path: {data}\n"
        f"train:\n  max_steps: 1\n{extra}"
    )
    return path


def test_a_duplicate_train_section_is_refused_naming_the_key_and_both_lines(tmp_path, capsys, monkeypatch,
                                                                             no_model_loads):  # fmt: skip
    recipe = recipe_file(tmp_path, "eval:\n  tasks: []\ntrain:\n  batch_size: 2\n")
    line = refused(["train", str(recipe)], tmp_path, capsys, monkeypatch)
    assert line == f"error: {recipe}:10: duplicate key 'train' (first at line 6); a key may appear once"


@pytest.mark.parametrize(
    "extra, message",
    [
        ("l0: &l0 [x, x, x, x, x, x, x, x, x]\n"
         + "".join(f"l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]\n" for n in range(1, 10)),
         "aliases expand to more than 100,000 values"),
        ("deep: " + "[" * 20000 + "]" * 20000 + "\n", ":8: nested more than 64 levels deep"),
    ],
    ids=["billion-laughs", "20k-deep"],
)  # fmt: skip
def test_a_yaml_bomb_or_deep_nesting_is_one_line(tmp_path, capsys, monkeypatch, no_model_loads, extra, message):
    recipe = recipe_file(tmp_path, extra)
    line = refused(["train", str(recipe)], tmp_path, capsys, monkeypatch)
    assert line.startswith(f"error: {recipe}:") and message in line


def test_a_5k_deep_set_key_is_one_line(tmp_path, capsys, monkeypatch, no_model_loads):
    recipe = recipe_file(tmp_path, "")
    line = refused(["train", str(recipe), "--set", ".".join(["a"] * 5000) + "=1"], tmp_path, capsys, monkeypatch)
    assert "the key has 5000 dotted parts; at most 32 are allowed" in line and len(line) < 300


# ----------------------------------------------------------------------------------------------- empty seeds, output


EMPTY_OUTPUT = "an empty path would write into the current folder: name the run's folder (`.` if that is meant)"


@pytest.mark.parametrize("given", [["-o", ""], ["--output", " "], ["--set", "output_dir=''"]],
                         ids=["-o ''", "--output ' '", "--set output_dir=''"])  # fmt: skip
def test_an_empty_output_path_is_refused(tmp_path, capsys, monkeypatch, no_model_loads, given):
    data = sentences(tmp_path)
    argv = ["train", "simcse-unsup", *given, "--set", f"data.path={data}", "model=/no/model/needed",
            "train.max_steps=1", "eval.tasks="]  # fmt: skip
    line = refused(argv, tmp_path, capsys, monkeypatch)
    assert EMPTY_OUTPUT in line
    assert ("--output" in line) if given[0] != "--set" else line.startswith("error: --set output_dir (over ")


def test_an_empty_output_dir_in_the_recipe_is_refused(tmp_path, capsys, monkeypatch, no_model_loads):
    recipe = recipe_file(tmp_path, "")
    recipe.write_text(recipe.read_text().replace(f"output_dir: {tmp_path / 'run'}", "output_dir: ''"))
    line = refused(["train", str(recipe)], tmp_path, capsys, monkeypatch)
    assert line == f"error: {recipe}: output_dir: Value error, {EMPTY_OUTPUT} (got '')"


def test_an_empty_seed_list_is_refused(tmp_path, capsys, monkeypatch, no_model_loads):
    argv = ["train", "scl", "--set", "method_args.seeds=[]", "model=/no/model/needed", "-o", str(tmp_path / "run")]
    line = refused(argv, tmp_path, capsys, monkeypatch)
    assert line.startswith("error: --set method_args.seeds (over ") and line.endswith(
        "method_args.seeds: Value error, an empty list trains nothing: give at least one seed, or leave the key out "
        "(one run with `seed`) (got [])"
    )


# ----------------------------------------------------------------------------------------------- in-batch at batch 1


IN_BATCH = "contrasts each pair with the other pairs of its batch, and a batch of 1 has none: its loss is constant"


@pytest.mark.parametrize(("recipe", "loss"), [("mnrl", "infonce"), ("simcse-sup", "dcl"), ("simcse-sup", "align_uniform")])
def test_an_in_batch_objective_at_batch_1_on_pairs_is_refused(tmp_path, capsys, monkeypatch, no_model_loads,
                                                               recipe, loss):  # fmt: skip
    argv = ["train", recipe, "--set", f"data.path={pairs(tmp_path)}", "train.batch_size=1", f"method_args.loss={loss}",
            "model=/no/model/needed", "eval.tasks=", "-o", str(tmp_path / "run")]  # fmt: skip
    line = refused(argv, tmp_path, capsys, monkeypatch)
    assert line.startswith("error: --set train.batch_size (over ") and f"method_args.loss={loss})" in line
    assert IN_BATCH in line and line.endswith(
        "Use train.batch_size of at least 2, or give (anchor, positive, negative) triplets (data.columns.negative)"
    )


def test_simcse_unsup_at_batch_1_is_refused_without_a_triplet_hint(tmp_path, capsys, monkeypatch, no_model_loads):
    argv = ["train", "simcse-unsup", "--set", f"data.path={sentences(tmp_path)}", "train.batch_size=1",
            "model=/no/model/needed", "eval.tasks=", "-o", str(tmp_path / "run")]  # fmt: skip
    line = refused(argv, tmp_path, capsys, monkeypatch)
    assert IN_BATCH in line and line.endswith("Use train.batch_size of at least 2")


def _check(tmp_path, recipe: str, data: Path, batch: int, gather: bool = True, loss: str = "infonce"):
    from contrastext.objectives.registry import make_objective
    from contrastext.runs.simcse import check_batch_has_negatives
    from tests.runs.recipe_runs import recipe_config

    config = recipe_config(recipe, tmp_path / "run", "/no/model/needed", f"data.path={data}",
                           f"train.batch_size={batch}")  # fmt: skip
    shape = "triplets" if "triplets" in data.name else "pairs"
    check_batch_has_negatives(config, loss, make_objective(loss), shape, gather)


def test_batch_1_with_hard_negatives_or_a_non_in_batch_objective_is_accepted(tmp_path):
    _check(tmp_path, "mnrl", pairs(tmp_path, negatives=True), batch=1)  # one hard negative per anchor
    _check(tmp_path, "mnrl", pairs(tmp_path, negatives=True), batch=1, loss="triplet")
    _check(tmp_path, "simcse-sup", pairs(tmp_path), batch=1, loss="alignment")  # no negatives at any size
    _check(tmp_path, "mnrl", pairs(tmp_path), batch=2)


def test_the_rows_are_counted_per_process_unless_gathered(tmp_path, monkeypatch):
    from contrastext.errors import ConfigError

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match=r"a batch of 1 per process \(3 over 2 processes\) has none.*at least 4"):
        _check(tmp_path, "mnrl", pairs(tmp_path), batch=3, gather=False)
    _check(tmp_path, "mnrl", pairs(tmp_path), batch=3, gather=True)  # gathered: 3 candidates per anchor
    _check(tmp_path, "mnrl", pairs(tmp_path), batch=4, gather=False)


def test_in_batch_tells_the_truth_at_one_row():
    """An ``in_batch`` pair objective gets no gradient from a batch of one pair (AlignUniform: alignment alone);
    at 16 rows every one of them does."""
    import torch

    from contrastext.objectives.registry import OBJECTIVES, make_objective

    torch.manual_seed(0)
    for name, cls in OBJECTIVES.items():
        if not cls.pair:
            continue
        for rows in (1, 16):
            x, y = torch.randn(rows, 8, requires_grad=True), torch.randn(rows, 8)
            make_objective(name)(x, y).backward()
            moved = bool(x.grad.abs().sum() > 0)
            if rows > 1 or not cls.in_batch:
                assert moved, (name, rows)
            elif name != "align_uniform":
                assert not moved, name


# ----------------------------------------------------------------------------------------------- blank texts, duplicates


def _load(tmp_path, recipe: str, data: Path):
    from contrastext.runs.data import load_training_data
    from tests.runs.recipe_runs import recipe_config

    config = recipe_config(recipe, tmp_path / "run", "/no/model/needed", f"data.path={data}")
    return load_training_data(config, None, default_task="nli-triplets" if recipe != "simcse-unsup" else "wiki1m")


def test_texts_empty_once_tokenised_are_counted_and_dropped_with_a_line(tmp_path, caplog):
    path = tmp_path / "pairs.csv"
    path.write_text("anchor,positive\nwhat about cats,a text on cats\n\u200b\u200f,a text on rain\n"
                    "what about rome,\u2066 \u2069\nwhat about chess,a text on chess\n", encoding="utf-8")  # fmt: skip
    with caplog.at_level("WARNING", logger="contrastext.runs"):
        data = _load(tmp_path, "mnrl", path)
    assert [example.texts[0] for example in data.examples] == ["what about cats", "what about chess"]
    assert data.description["n_dropped_blank"] == 2 and data.description["n_train"] == 2
    assert [record.getMessage() for record in caplog.records] == [
        "data: dropped 2 of 4 rows with a text that is empty once tokenised (only whitespace, control, zero-width "
        f"or bidi characters), the first at {path}:3"
    ]


def test_every_text_blank_is_refused(tmp_path):
    from contrastext.errors import ConfigError

    path = tmp_path / "sentences.txt"
    path.write_text("\u200b\n\u200f\u200e\n\u2066x\u2069\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"data: 1 training example\(s\); contrastive training needs at least 2"):
        _load(tmp_path, "simcse-unsup", path)


def test_the_share_of_duplicate_positives_is_reported_and_warned_above_the_threshold(tmp_path, caplog):
    path = tmp_path / "pairs.csv"
    path.write_text("anchor,positive\n" + "".join(f"q{n},the same positive\n" for n in range(8)))
    with caplog.at_level("INFO", logger="contrastext.runs"):
        data = _load(tmp_path, "mnrl", path)
    assert data.description["duplicate_positives"] == 7
    [record] = caplog.records
    assert record.levelname == "WARNING" and record.getMessage() == (
        "data: 7 of 8 rows (87.5%) repeat another row's positive (the most repeated: 'the same positive'); in a "
        "batch holding two of them, each is the other's negative. Above 10%: remove the repeated rows, or --set "
        "data.batch_sampler=no_duplicates"
    )
    caplog.clear()
    unique = tmp_path / "few.csv"
    unique.write_text("anchor,positive\n" + "".join(f"q{n},positive {n % 19}\n" for n in range(20)))
    with caplog.at_level("INFO", logger="contrastext.runs"):
        data = _load(tmp_path, "mnrl", unique)
    assert data.description["duplicate_positives"] == 1
    assert [record.levelname for record in caplog.records] == ["INFO"]  # 5%: reported, no warning
