"""``contrastext config show``: the effective config with each value's origin; ``train --help`` lists the main keys."""

from __future__ import annotations

import yaml

from contrastext.cli.config_command import value_origins
from contrastext.cli.train_command import MAIN_KEYS
from contrastext.training.config import TrainConfig
from contrastext.training.key_names import config_keys
from tests.cli.cli_runs import run

RECIPE = """\
method: simcse-unsup
model: bundled:all-MiniLM-L6-v2
output_dir: runs/x
train:
  epochs: 1
  lr: 2.0e-5
data:
  task: wiki1m
method_args:
  temperature: 0.1
"""


def _origins(out: str) -> dict[str, tuple[object, str]]:
    """``dotted key -> (value, origin)`` read back from the printed YAML and its comments."""
    shown, path = {}, []
    for line in out.splitlines():
        if line.startswith("#"):
            continue
        depth = (len(line) - len(line.lstrip())) // 2
        text, _, origin = line.partition(" # ")
        key, _, value = text.strip().partition(":")
        path = path[:depth] + [key]
        if origin:
            shown[".".join(path)] = (yaml.safe_load(value), origin.strip())
    return shown


def test_config_show_prints_every_key_with_its_value_and_origin(tmp_path, capsys):
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(RECIPE)
    code, out, err = run(["config", "show", str(recipe), "--set", "train.max_steps=50", "train.schedule=cosine",
                          "data.path=my.txt", "--output", str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert yaml.safe_load(out)["train"]["schedule"] == "cosine"  # the output is YAML
    shown = _origins(out)
    assert shown["train.max_steps"] == (50, "--set")
    assert shown["train.schedule"] == ("cosine", "--set")
    assert shown["train.lr"] == (2e-5, "recipe")
    assert shown["train.epochs"] == (1.0, "recipe, not used: train.max_steps sets the length")
    assert shown["train.batch_size"] == (64, "default")
    assert shown["train.optimizer"] == ("adamw", "default")
    assert shown["output_dir"] == (str(tmp_path / "out"), "--output")
    assert shown["seed"] == (42, "default")
    assert shown["data.path"] == ("my.txt", "--set")
    assert shown["data.task"] == (None, "recipe, replaced by --set data.path")
    assert shown["method_args.temperature"] == (0.1, "recipe")
    assert shown["method_args.pooling"][1] == "default"  # the method's own defaults are shown too
    assert {key for key in config_keys(TrainConfig) if key.count(".") == 1} <= set(shown)  # every key
    assert f"# effective config of {recipe} with --set train.max_steps=50" in out


def test_config_show_of_a_shipped_recipe_and_its_errors(capsys):
    code, out, _ = run(["config", "show", "simcse-unsup"], capsys)
    assert code == 0
    assert _origins(out)["method"] == ("simcse-unsup", "recipe")
    code, _, err = run(["config", "show", "simcse-unsup", "--set", "train.optimizer=lion"], capsys)
    assert code == 2 and "train.optimizer" in err
    code, _, err = run(["config", "show", "simcse-unsup", "--set", "train.learning_rate=1e-5"], capsys)
    assert code == 2 and "did you mean train.lr?" in err


def test_origins_of_sections_given_whole_with_set():
    effective = {"train": {"lr": 1.0, "report_to": []}, "eval": {"tasks": ["a"], "limit": None}}
    raw = {"train": {"lr": 2.0}}
    origins = value_origins(effective, raw, {"eval"})
    assert origins == {"train.lr": "recipe", "train.report_to": "default", "eval.tasks": "--set",
                       "eval.limit": "--set"}


def test_train_help_lists_the_main_keys_and_points_to_config_show(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(["train", "--help"], capsys)
    assert code == 0
    known = set(config_keys(TrainConfig))
    for names, _ in MAIN_KEYS:
        for key in names.split(" / "):
            assert key in known, key
            assert key in out, key
    for key in ("train.lr", "train.batch_size", "train.max_steps", "train.schedule", "train.warmup_ratio",
                "train.mixed_precision", "train.eval_every", "output_dir"):
        assert key in out
    assert "contrastext config show RECIPE" in out and "docs/CONFIG.md" in out
