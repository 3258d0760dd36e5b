"""Trackers (issue 9, item 7): ``train.report_to`` sends the log records to TensorBoard / Weights & Biases
through Accelerate's tracker classes; one asked for but not installed is a one-line warning; the JSONL log
is written in every case.

W&B never touches the network here: the package is replaced by a recording fake.
"""

from __future__ import annotations

import importlib.machinery
import json
import logging
import sys
import types
from pathlib import Path

import pytest

import contrastext.cli.train_command  # noqa: F401  (registers the command)
from contrastext.training import logging as run_logging
from contrastext.training.config import load_config
from contrastext.training.logging import RunLogger, flatten_config
from tests.cli.cli_runs import run

RECIPE = str(Path(__file__).resolve().parents[2] / "recipes" / "simcse-unsup.yaml")


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series in a TensorBoard folder (its event files, sub-folders included)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    series: dict[str, list[tuple[int, float]]] = {}
    for events in sorted(folder.rglob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            series.setdefault(tag, []).extend((event.step, event.value) for event in accumulator.Scalars(tag))
    return series


class FakeWandb(types.ModuleType):
    """Just what accelerate's WandBTracker calls: ``init``, ``config.update``, ``run.log``, ``run.finish``."""

    def __init__(self) -> None:
        super().__init__("wandb")
        self.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
        self.inits: list[dict] = []
        self.logged: list[tuple[dict, int | None]] = []
        self.finished = 0
        fake = self

        class Config:
            values: dict = {}

            def update(self, values, allow_val_change=False):
                self.values.update(values)

        class Run:
            def log(self, values, step=None, **kwargs):
                fake.logged.append((dict(values), step))

            def finish(self):
                fake.finished += 1

        self.config = Config()
        self._run = Run()

    def init(self, project=None, **kwargs):
        self.inits.append({"project": project, **kwargs})
        return self._run


@pytest.fixture
def fake_wandb(monkeypatch) -> FakeWandb:
    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    return fake


def test_report_to_defaults_to_nothing_and_the_old_flag_names_it():
    from contrastext.errors import ConfigError

    assert load_config(RECIPE).train.report_to == []
    for flag in ("true", "false"):  # the legacy train.tensorboard flag is gone (issue 20): its error names report_to
        with pytest.raises(ConfigError, match=r"--set train.tensorboard .*set train.report_to"):
            load_config(RECIPE, [f"train.tensorboard={flag}"])
    assert load_config(RECIPE, ["train.report_to=wandb"]).train.report_to == ["wandb"]
    assert load_config(RECIPE, ["train.report_to=none"]).train.report_to == []


def test_an_unknown_tracker_is_a_config_error_naming_the_key():
    from contrastext.errors import ConfigError

    with pytest.raises(ConfigError, match=r"--set train.report_to .*train.report_to.0.*'tensorboard' or 'wandb'"):
        load_config(RECIPE, ["train.report_to=[mlflow]"])


def test_tensorboard_receives_every_numeric_field_at_its_step(tmp_path):
    logger = RunLogger(tmp_path, report_to=["tensorboard"], config={"train": {"lr": 1e-3, "report_to": ["tensorboard"]}})
    logger.log({"step": 1, "epoch": 0, "loss": 0.5, "loss/infonce": 0.5, "lr": 1e-3})
    logger.log({"step": 2, "epoch": 0, "loss": 0.25, "eval/stsb_dev_spearman": 71.5})
    logger.close()
    series = scalars(tmp_path / "tensorboard")
    assert [step for step, _ in series["loss"]] == [1, 2]
    assert series["loss"][1][1] == pytest.approx(0.25)
    assert series["eval/stsb_dev_spearman"] == [(2, pytest.approx(71.5))]
    assert [json.loads(line)["step"] for line in (tmp_path / "train_log.jsonl").read_text().splitlines()] == [1, 2]


def test_wandb_receives_the_config_and_the_records(tmp_path, fake_wandb, monkeypatch):
    monkeypatch.setenv("WANDB_PROJECT", "my-project")
    logger = RunLogger(tmp_path / "run-a", report_to=["wandb"], config={"train": {"lr": 1e-3}, "eval": {"tasks": []}})
    logger.log({"step": 3, "loss": 0.5, "note": "text", "flag": True})
    logger.close()
    assert fake_wandb.inits == [{"project": "my-project", "name": "run-a", "dir": str(tmp_path / "run-a")}]
    assert fake_wandb.config.values == {"train.lr": 1e-3, "eval.tasks": "[]"}
    assert fake_wandb.logged == [({"loss": 0.5}, 3)]  # numbers only; bools and text stay in the JSONL log
    assert fake_wandb.finished == 1


def test_a_tracker_that_is_not_installed_is_one_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb fails, find_spec says missing
    monkeypatch.setattr(run_logging, "tracker_installed", lambda name: name != "wandb")
    with caplog.at_level(logging.WARNING, logger="contrastext.training"):
        logger = RunLogger(tmp_path, report_to=["wandb"])
    logger.log({"step": 1, "loss": 1.0})
    logger.close()
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert "wandb" in warnings[0] and "not installed" in warnings[0] and "contrastext[wandb]" in warnings[0]
    assert (tmp_path / "train_log.jsonl").is_file()


def test_a_process_that_does_not_log_starts_no_tracker(tmp_path, fake_wandb):
    logger = RunLogger(tmp_path, report_to=["tensorboard", "wandb"], enabled=False)
    logger.log({"step": 1, "loss": 1.0})
    logger.close()
    assert fake_wandb.inits == [] and not (tmp_path / "tensorboard").exists()


def test_flatten_config_gives_tracker_friendly_scalars():
    flat = flatten_config({"seed": 1, "train": {"lr": 1e-5, "report_to": ["wandb"], "grad_clip": None}})
    assert flat == {"seed": 1, "train.lr": 1e-5, "train.report_to": '["wandb"]', "train.grad_clip": None}


def test_train_command_logs_to_tensorboard_and_warns_about_a_missing_wandb(
    tmp_path, tiny_bert_path, monkeypatch, capsys, caplog
):
    """A real run through the CLI: TensorBoard gets the loss of every logged step; wandb (not installed here)
    is one warning; the JSONL log is complete."""
    monkeypatch.setattr(run_logging, "tracker_installed", lambda name: name != "wandb")
    sentences = tmp_path / "mine.txt"
    sentences.write_text("".join(f"sentence {i} about topic {i % 3}.\n" for i in range(8)), encoding="utf-8")
    output = tmp_path / "run"
    argv = [
        "train", RECIPE,
        "--set", f"model={tiny_bert_path}", f"data.path={sentences}", "data.task=null", "eval.tasks=[]",
        "train.max_steps=3", "train.batch_size=4", "train.log_every=1", "train.save_every=null",
        "train.progress_bar=false", "train.metric_for_best=null", "train.report_to=[tensorboard, wandb]",
        "--output", str(output),
    ]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="contrastext.training"):
        code, _, stderr = run(argv, capsys)
    assert code == 0, stderr
    assert [step for step, _ in scalars(output / "tensorboard")["loss"]] == [1, 2, 3]
    assert sum("contrastext[wandb]" in record.getMessage() for record in caplog.records) == 1
    log = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]
    assert [record["step"] for record in log] == [1, 2, 3]
