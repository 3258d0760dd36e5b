"""``contrastext train`` end to end (in-process through ``main``): overrides, outputs, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import contrastext.cli.train_command  # noqa: F401  (registers the command until cli/__init__ imports it)
from tests.cli.cli_runs import run

RECIPE = str(Path(__file__).resolve().parents[2] / "recipes" / "simcse-unsup.yaml")
FAST = [
    "train.max_steps=2",
    "train.epochs=null",
    "train.batch_size=4",
    "train.eval_every=2",
    "train.save_every=null",
    "train.progress_bar=false",
    "train.report_to=none",
    "data.limit=16",
    "eval.limit=20",
]


def with_sets(*overrides: str) -> list[str]:
    return [argument for override in overrides for argument in ("--set", override)]


def test_train_runs_a_recipe_with_overrides_and_prints_outputs(tmp_path, tiny_bert_path, data_root, capsys):
    output = tmp_path / "run"
    argv = ["train", RECIPE, *with_sets(*FAST, f"model={tiny_bert_path}"), "--output", str(output)]
    code, stdout, stderr = run([*argv, "--data-root", str(data_root)], capsys)
    assert code == 0, stderr
    assert f"outputs in {output}" in stdout
    assert "stsb_dev_spearman" in stdout
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["last_step"] == 2 and "stsb_dev_spearman" in metrics["metrics"]
    assert (output / "best" / "encoder" / "modules.json").is_file()

    # --resume on a finished run: nothing left to do, the same metrics come back
    code, stdout, stderr = run([*argv, "--data-root", str(data_root), "--resume"], capsys)
    assert code == 0, stderr
    assert "resuming simcse-unsup" in stdout
    assert json.loads((output / "metrics.json").read_text())["last_step"] == 2


def one_line_error(code: int, stderr: str) -> str:
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def test_a_bad_override_key_exits_2_naming_key_and_file(tmp_path, data_root, capsys):
    argv = ["train", RECIPE, *with_sets("train.max_stepz=3"), "--output", str(tmp_path), "--data-root", str(data_root)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "train.max_stepz" in message and "simcse-unsup.yaml" in message and "--set" in message


def test_a_bad_method_arg_exits_2_naming_key_and_file(tmp_path, data_root, capsys):
    argv = ["train", RECIPE, *with_sets("method_args.temprature=0.1"), "--data-root", str(data_root)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "method_args.temprature" in message and "simcse-unsup.yaml" in message


def test_an_unknown_method_and_a_missing_recipe_exit_2(tmp_path, data_root, capsys):
    argv = ["train", RECIPE, *with_sets("method=simclr"), "--data-root", str(data_root)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "simclr" in message and "simcse-unsup" in message
    message = one_line_error(*run(["train", str(tmp_path / "nope.yaml")], capsys)[::2])
    assert "nope.yaml" in message


def test_the_demo_config_is_a_valid_simcse_unsup_recipe(tmp_path):
    from contrastext.cli.demo_command import METRIC, demo_config
    from contrastext.runs.registry import get_recipe

    config = demo_config(tmp_path, steps=7, batch_size=32, seed=1)
    args = config.method_args_as(get_recipe(config.method).args_model)
    assert config.method == "simcse-unsup" and config.train.max_steps == 7
    assert config.train.eval_every == 2 and config.train.eval_at_start and config.train.overwrite
    assert config.train.metric_for_best == METRIC and args.pooling == "cls" and args.mlp == "train"


def test_the_demo_verdict_says_which_way_it_went():
    from contrastext.cli.demo_command import verdict

    assert "raised" in verdict(79.0, 81.0, 86.0) and "below" in verdict(79.0, 81.0, 86.0)
    assert "LOWERED" in verdict(81.0, 79.0, 86.0)
    assert "unchanged" in verdict(80.0, 80.1, 79.0) and "above" in verdict(80.0, 80.1, 79.0)


def test_a_shipped_recipe_is_found_by_name_from_any_folder(tmp_path, tiny_bert_path, data_root, capsys, monkeypatch):
    """`contrastext train simcse-unsup` reads the recipe shipped inside the package (no recipes/ folder needed)."""
    monkeypatch.chdir(tmp_path)  # no recipes/ here
    output = tmp_path / "by-name"
    argv = ["train", "simcse-unsup", *with_sets(*FAST, f"model={tiny_bert_path}"), "--output", str(output)]
    code, stdout, stderr = run([*argv, "--data-root", str(data_root)], capsys)
    assert code == 0, stderr
    assert json.loads((output / "metrics.json").read_text())["last_step"] == 2


def test_an_unknown_recipe_name_lists_the_shipped_ones(tmp_path, data_root, capsys):
    argv = ["train", "simcse-unsupervised", "--output", str(tmp_path), "--data-root", str(data_root)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "simcse-unsupervised" in message and "simcse-unsup" in message and "capt-continued" in message


def test_resume_with_a_changed_lr_is_refused_naming_the_key(tmp_path, tiny_bert_path, data_root, capsys):
    """Through the CLI: a run, then --resume with another learning rate: one error line, nothing rewritten."""
    output = tmp_path / "run"
    argv = ["train", RECIPE, *with_sets(*FAST, f"model={tiny_bert_path}"), "--output", str(output),
            "--data-root", str(data_root)]
    code, _, stderr = run(argv, capsys)
    assert code == 0, stderr
    config_text = (output / "config.yaml").read_text()
    message = one_line_error(*run([*argv, *with_sets("train.lr=0.001"), "--resume"], capsys)[::2])
    assert "--resume" in message and "train.lr" in message and "0.001" in message
    assert (output / "config.yaml").read_text() == config_text


def test_a_run_prints_its_evaluations_and_world_size_and_records_the_world_size(
    tmp_path, tiny_bert_path, data_root, capsys, monkeypatch
):
    """Issue 22: evaluations during training were silent and the world size was said and recorded nowhere."""
    from contrastext.training import trainer

    monkeypatch.setattr(trainer, "_ANNOUNCED_WORLDS", set())
    output = tmp_path / "run"
    sets = with_sets(*FAST, "train.max_steps=4", f"model={tiny_bert_path}")
    code, stdout, stderr = run(["train", RECIPE, *sets, "--output", str(output), "--data-root", str(data_root)],
                               capsys)
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert "world size 1 (single process, cpu)" in lines
    evaluations = [line for line in lines if line.startswith("eval step")]
    assert [line.split(":")[0] for line in evaluations] == ["eval step 2/4", "eval step 4/4"]
    assert all("stsb_dev_spearman=" in line and "(best " in line for line in evaluations)
    assert json.loads((output / "metrics.json").read_text())["world_size"] == 1
    assert "| world size | 1 |" in (output / "best" / "encoder" / "README.md").read_text()
    first = json.loads((output / "train_log.jsonl").read_text().splitlines()[0])
    assert first["world_size"] == 1


def test_only_the_main_process_prints_the_banner_and_the_metrics(tmp_path, capsys, monkeypatch):
    """Under torchrun every process runs the command: the banner and the summary printed once per process."""
    import contrastext.runs.registry as registry

    summary = {"metrics": {"stsb_dev_spearman": 0.5}, "best_step": 2, "log_path": str(tmp_path / "log")}
    monkeypatch.setattr(registry, "run_recipe", lambda config, root, resume=False, resume_from=None, **_: summary)
    argv = ["train", RECIPE, *with_sets(*FAST), "--output", str(tmp_path / "run")]
    monkeypatch.setenv("RANK", "1")  # a second process, before the trainer sets the process group up
    code, stdout, stderr = run(argv, capsys)
    assert (code, stdout) == (0, ""), stderr
    monkeypatch.setenv("RANK", "0")
    code, stdout, stderr = run(argv, capsys)
    assert code == 0, stderr
    assert stdout.count("training simcse-unsup") == 1 and "stsb_dev_spearman: 0.5000" in stdout
