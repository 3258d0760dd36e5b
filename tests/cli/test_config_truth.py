"""Config truth (issue 9, item 6): what `contrastext train` is told is what it does.

- ``--set a=1 b=2``: several KEY=VALUE after one flag (the flag may still be repeated);
- ``train.max_steps`` given with ``--set`` runs exactly that many steps although the recipe sets ``epochs``
  (and ``epochs`` given with ``--set`` wins over a recipe's ``max_steps``);
- ``eval.tasks=`` and ``eval.tasks=[]`` both clear the list;
- ``--data-root`` is needed only when a registry task is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import contrastext.cli.train_command  # noqa: F401  (registers the command)
from contrastext.cli.train_command import expand_set_values
from contrastext.data.root import DATA_ROOT_VARIABLE
from contrastext.training.config import load_config
from tests.cli.cli_runs import run

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
SIMCSE = str(RECIPES / "simcse-unsup.yaml")  # train.epochs: 1, data.task: wiki1m, eval.tasks: [stsb:dev]
SENTENCES = [f"sentence number {i} is about {topic}." for i, topic in enumerate(["cats", "dogs", "rain", "tea"] * 2)]
QUIET = [
    "train.batch_size=4",
    "train.save_every=null",
    "train.log_every=1",
    "train.progress_bar=false",
    "train.metric_for_best=null",
]


def one_line_error(code: int, stderr: str) -> str:
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.fixture
def sentences(tmp_path) -> Path:
    path = tmp_path / "mine.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def no_data_root(monkeypatch):
    monkeypatch.delenv(DATA_ROOT_VARIABLE, raising=False)


# ---------------------------------------------------------------------------------------------------------
# --set with several values


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["r.yaml", "--set", "a=1", "b.c=2"], ["r.yaml", "--set", "a=1", "--set", "b.c=2"]),
        (["--set", "a=1", "b=[x, y]", "r.yaml"], ["--set", "a=1", "--set", "b=[x, y]", "r.yaml"]),
        (["--set=a=1", "b=2", "-o", "out"], ["--set=a=1", "--set", "b=2", "-o", "out"]),
        (["--set", "a=1", "--set", "b=2"], ["--set", "a=1", "--set", "b=2"]),
        (["--set", "a=1", "--", "c=3"], ["--set", "a=1", "--", "c=3"]),
        (["c=3", "--set", "a=", "eval.tasks="], ["c=3", "--set", "a=", "--set", "eval.tasks="]),
        (["--set", "bad", "x=1"], ["--set", "bad", "--set", "x=1"]),  # the bad one is refused by load_config
    ],
)
def test_set_values_are_expanded_into_repeated_flags(argv, expected):
    assert expand_set_values(argv) == expected


def test_several_values_after_one_set_all_apply(tmp_path, capsys):
    """An unknown key among several after one --set is named: every value reached the config."""
    argv = ["train", SIMCSE, "--set", "train.lr=1e-4", "train.max_stepz=3", "--output", str(tmp_path / "x")]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "--set train.max_stepz" in message and "simcse-unsup.yaml" in message


def test_a_hugging_face_name_on_the_command_line_is_one_error_line_with_our_key(tmp_path, capsys):
    argv = ["train", SIMCSE, "--set", "train.learning_rate=1e-5", "--output", str(tmp_path / "x")]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "--set train.learning_rate" in message and "simcse-unsup.yaml" in message
    assert message.endswith("train.learning_rate: unknown key; did you mean train.lr?")


# ---------------------------------------------------------------------------------------------------------
# max_steps vs epochs, and emptied lists (config level: fast)


def test_max_steps_from_the_command_line_wins_over_the_recipes_epochs():
    config = load_config(SIMCSE, ["train.max_steps=5"])
    assert (config.train.epochs, config.train.max_steps, config.length_from) == (1, 5, "max_steps")


def test_epochs_from_the_command_line_win_over_the_recipes_max_steps():
    config = load_config(RECIPES / "scl.yaml", ["train.epochs=2"])  # the file sets max_steps: 200
    assert config.length_from == "epochs"
    both = load_config(RECIPES / "scl.yaml", ["train.epochs=2", "train.max_steps=7"])
    assert both.length_from == "max_steps"  # both on the command line: max_steps


def test_in_one_file_max_steps_wins(tmp_path):
    recipe = tmp_path / "both.yaml"
    recipe.write_text("method: simcse-unsup\nmodel: m\noutput_dir: o\ntrain:\n  max_steps: 4\n  epochs: 3\n")
    assert load_config(recipe).length_from == "max_steps"
    assert load_config(recipe, ["train.max_steps=null"]).length_from == "epochs"


@pytest.mark.parametrize("value", ["", "[]", "null"])
def test_an_empty_value_clears_a_list(value):
    config = load_config(SIMCSE, [f"eval.tasks={value}"])
    assert config.eval.tasks == []


@pytest.mark.parametrize("columns", ["60", "80", "250"])
def test_the_help_shows_the_list_examples_it_documents(capsys, monkeypatch, columns):
    """Whole at any terminal width: rich cuts a long unbroken token in a narrow column with an ellipsis."""
    monkeypatch.setenv("COLUMNS", columns)
    code, stdout, _ = run(["train", "--help"], capsys)
    assert code == 0
    lines = [line.strip(" │") for line in stdout.splitlines()]
    assert "--set eval.tasks=[stsb:dev,sickr:test]" in lines
    assert any(line.startswith("--set eval.tasks=[]") for line in lines)
    assert "--set train.max_steps=10 method_args.temperature=0.1" in lines
    assert "--set a=1 b=2" in " ".join(" ".join(lines).split())
    if int(columns) >= 80:  # the usual terminal: no token of any option's help is cut either
        assert "…" not in stdout


# ---------------------------------------------------------------------------------------------------------
# End to end


def test_own_file_without_a_data_root_runs_exactly_max_steps(tmp_path, tiny_bert_path, sentences, no_data_root, capsys):
    """8 sentences, batch 4: the recipe's 1 epoch is 2 steps; --set train.max_steps=5 runs 5 (the old rule
    stopped at 2). No --data-root and no $CONTRASTEXT_DATA: the own file and an emptied eval.tasks need none."""
    output = tmp_path / "run"
    argv = [
        "train", SIMCSE,
        "--set", f"model={tiny_bert_path}", f"data.path={sentences}", "data.task=null", "eval.tasks=",
        "train.max_steps=5", *QUIET,
        "--output", str(output),
    ]  # fmt: skip
    code, stdout, stderr = run(argv, capsys)
    assert code == 0, stderr
    summary = json.loads((output / "metrics.json").read_text())
    assert summary["last_step"] == 5
    steps = [json.loads(line)["step"] for line in (output / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5]
    saved = (output / "config.yaml").read_text()
    assert "max_steps: 5" in saved and "tasks: []" in saved


def test_a_registry_task_without_a_data_root_names_the_way_to_give_one(tmp_path, tiny_bert_path, no_data_root, capsys):
    argv = ["train", SIMCSE, "--set", f"model={tiny_bert_path}", "train.max_steps=1", *QUIET,
            "--output", str(tmp_path / "run")]  # fmt: skip
    message = one_line_error(*run(argv, capsys)[::2])
    assert "--data-root" in message and DATA_ROOT_VARIABLE in message


def test_a_given_data_root_must_exist(tmp_path, sentences, capsys):
    argv = ["train", SIMCSE, "--set", f"data.path={sentences}", "--output", str(tmp_path / "run"),
            "--data-root", str(tmp_path / "nowhere")]  # fmt: skip
    message = one_line_error(*run(argv, capsys)[::2])
    assert "nowhere" in message and "--data-root" in message


# ---------------------------------------------------------------------------------------------------------
# docs/CONFIG.md


def test_config_md_is_current():
    """docs/CONFIG.md is what the generator makes of the models now: regenerate it after changing a model."""
    from contrastext.cli.config_docs import DEFAULT_PATH, GENERATOR, render

    assert DEFAULT_PATH.read_text(encoding="utf-8") == render(), f"docs/CONFIG.md is stale: run {GENERATOR}"


def test_every_train_and_eval_key_and_the_top_level_ones_are_described():
    from contrastext.training.config import EvalSection, TrainConfig, TrainSection

    undescribed = [
        f"{prefix}{name}"
        for prefix, model in (("", TrainConfig), ("train.", TrainSection), ("eval.", EvalSection))
        for name, field in model.model_fields.items()
        if not field.description and name not in ("train", "data", "eval", "method_args")
    ]
    assert undescribed == []


def test_config_md_maps_the_hugging_face_names():
    from contrastext.cli.config_docs import render

    text = render()
    assert "## Hugging Face Trainer / sentence-transformers names" in text
    assert "| `learning_rate` | `train.lr` |" in text and "| `per_device_train_batch_size` | `train.batch_size` |" in text


def test_config_md_documents_the_rules_and_every_method():
    from contrastext.cli.config_docs import render
    from contrastext.runs.registry import recipe_names

    text = render()
    for key in ("`train.max_steps`", "`train.report_to`", "`train.grad_accumulation`", "`train.warmup_steps`",
                "`train.early_stopping_patience`", "`train.group_by_length`", "`eval.tasks`", "`data.max_length`"):
        assert key in text
    assert "--set a=1 b=2" in text and "wins over the file" in text
    for name in recipe_names():
        assert f"### `{name}`" in text


def test_one_value_for_a_list_key_is_a_list_of_one():
    from contrastext.runs.recipes import recipe_path
    from contrastext.training.config import load_config

    config = load_config(recipe_path("mnrl"), ["eval.tasks=sts:my_sts.csv", "data.tasks=sst2"])
    assert config.eval.tasks == ["sts:my_sts.csv"] and config.data.tasks == ["sst2"]
