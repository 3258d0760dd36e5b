"""``contrastext train RECIPE --resume-from CHECKPOINT --output NEW_DIR`` (issue 22, item 4): Hugging Face's
``resume_from_checkpoint=path`` into a new folder. An interrupted run continued into a new folder ends with the
weights, metrics and log of an uninterrupted one; the source run is never modified; what cannot be resumed that
way is one ``error:`` line, exit 2."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import contrastext.cli.train_command  # noqa: F401  (registers the command until cli/__init__ imports it)
from contrastext.cli import main
from contrastext.runtime.run_log import read_log
from contrastext.training import trainer
from tests.cli.cli_runs import run
from tests.cli.test_train_command import FAST, RECIPE, one_line_error, with_sets


class Interrupted(Exception):
    """The run dies right after a checkpoint (as a kill would)."""


def folder_digest(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` (relative path) -> the SHA-256 of its bytes."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def train_argv(output: Path, tiny_bert_path: str, data_root: Path, *sets: str) -> list[str]:
    return ["train", RECIPE, *with_sets(*FAST, "train.max_steps=4", "train.save_every=2", f"model={tiny_bert_path}",
                                        *sets), "--output", str(output), "--data-root", str(data_root)]


def interrupted_run(output: Path, argv: list[str], at_step: int, monkeypatch) -> None:
    """Run ``argv`` and kill it (an exception) just after its checkpoint of ``at_step``."""
    save = trainer.save_checkpoint

    def save_then_die(*args, **kwargs):
        folder = save(*args, **kwargs)
        if folder.name == f"step-{at_step:06d}":
            raise Interrupted
        return folder

    with monkeypatch.context() as patch:
        patch.setattr(trainer, "save_checkpoint", save_then_die)
        with pytest.raises(Interrupted):
            main(argv)
    assert not (output / "final").exists() and (output / "checkpoints" / f"step-{at_step:06d}").is_dir()


def test_an_interrupted_run_resumed_into_a_new_folder_ends_as_the_uninterrupted_one(
    tmp_path, tiny_bert_path, data_root, capsys, monkeypatch
):
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    code, _, stderr = run(train_argv(reference, tiny_bert_path, data_root), capsys)
    assert code == 0, stderr
    interrupted_run(killed, train_argv(killed, tiny_bert_path, data_root), 2, monkeypatch)
    capsys.readouterr()
    before = folder_digest(killed)

    expected_weights = load_file(reference / "final" / "encoder" / "model.safetensors")
    expected_metrics = json.loads((reference / "metrics.json").read_text())
    expected_log = read_log(reference / "train_log.jsonl")
    # the checkpoint folder itself, and the run folder (its latest checkpoint): the same continuation
    for source, new in ((killed / "checkpoints" / "step-000002", tmp_path / "from-checkpoint"),
                        (killed, tmp_path / "from-run")):
        code, stdout, stderr = run([*train_argv(new, tiny_bert_path, data_root), "--resume-from", str(source)], capsys)
        assert code == 0, stderr
        assert f"resuming simcse-unsup from {source}; outputs in {new}" in stdout
        weights = load_file(new / "final" / "encoder" / "model.safetensors")
        assert weights.keys() == expected_weights.keys()
        for name, tensor in expected_weights.items():
            assert torch.equal(tensor, weights[name]), name
        metrics = json.loads((new / "metrics.json").read_text())
        assert metrics["last_step"] == 4 and metrics["best_step"] == expected_metrics["best_step"]
        assert metrics["metrics"] == expected_metrics["metrics"]
        assert metrics["best_model_dir"] == str(new / "best" / "encoder")  # the source's best/, copied
        log = read_log(new / "train_log.jsonl")  # the source's records up to step 2, then this run's
        assert [record["step"] for record in log] == [record["step"] for record in expected_log]
        assert [record.get("loss") for record in log] == [record.get("loss") for record in expected_log]
        assert sorted(path.name for path in (new / "checkpoints").glob("step-*")) == ["step-000004"]
        assert folder_digest(killed) == before  # the source run is never modified


def test_what_cannot_be_resumed_into_a_new_folder_is_one_error_line(tmp_path, tiny_bert_path, data_root, capsys):
    source, other = tmp_path / "runs" / "source", tmp_path / "runs" / "other"
    for output in (source, other):
        code, _, stderr = run(train_argv(output, tiny_bert_path, data_root, "train.max_steps=2"), capsys)
        assert code == 0, stderr
    before = folder_digest(source)
    checkpoint = source / "checkpoints" / "step-000002"

    def refused(new: Path, resume_from: Path, *sets: str, flags: tuple[str, ...] = ()) -> str:
        argv = train_argv(new, tiny_bert_path, data_root, "train.max_steps=2", *sets)
        return one_line_error(*run([*argv, *flags, "--resume-from", str(resume_from)], capsys)[::2])

    message = refused(tmp_path / "new", checkpoint, flags=("--resume",))
    assert "--resume and --resume-from together" in message
    assert "is, or lies inside, the run folder" in refused(source, checkpoint)
    assert "is, or lies inside, the run folder" in refused(source / "sub", source)
    assert "lies inside the output folder" in refused(tmp_path / "runs", checkpoint)
    assert "already holds a run" in refused(other, checkpoint)
    message = refused(tmp_path / "new", checkpoint, "train.lr=0.001")
    assert "--resume-from" in message and "train.lr" in message and "0.001" in message
    assert "no checkpoint or run folder" in refused(tmp_path / "new", tmp_path / "missing")
    assert "neither a checkpoint" in refused(tmp_path / "new", tmp_path / "runs")
    argv = ["train", "scl", "--output", str(tmp_path / "new"), "--resume-from", str(checkpoint)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "scl runs several stages" in message
    assert not (tmp_path / "new").exists()
    assert folder_digest(source) == before
