"""Fault suite, resume tampering (issue 21, item 3): a resume verifies what it reads.

A run of the tiny BERT on a user's file is trained for 2 steps (one checkpoint), once a module; each test tampers
with the checkpoint of a copy of the run folder, or with the data file (put back after the test), and runs
``train --resume`` through the command line:

- ``trainer_state.json`` off its schema (a step ``"three"``, a negative step, a float epoch, a best step after
  the step, a list instead of an object) or forged (step 1000 of a 4-step run, with the manifest re-hashed, in
  place or with the folder and ``latest`` renamed to match): one ``error:`` line naming the file and the key,
  exit 2, before any model loads, the run folder's hashes unchanged;
- the data file replaced: refused naming the file, the folders unchanged; with ``--resume-allow-data-change`` the
  run goes on, with a line saying so, and its next checkpoint records the new data;
- the same bytes with a new modification time: accepted without a word about the data;
- a checkpoint without ``data_fingerprint.json`` (saved before fingerprints existed): resumed, with a line saying
  the data could not be verified;
- ``--resume-from`` a checkpoint whose data changed: refused the same way, nothing written into the new folder;
- a trainer state damaged after the fact (its manifest not re-hashed): skipped with a warning, an older
  checkpoint resumed, as before;
- a step past a ``train.epochs`` plan (known only once the data is read): refused by the trainer, nothing written.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

import contrastext.cli.train_command  # noqa: F401  (registers the command)
from contrastext.cli import main
from contrastext.training.checkpoint import FINGERPRINT_FILE, read_data_fingerprint, write_manifest
from tests.cli.cli_runs import run
from tests.cli.test_train_command import with_sets
from tests.robustness.hostile import folder_digest
from tests.robustness.test_outputs_apart_from_inputs import TEXTS, own_data_argv

CHECKPOINT = "step-000002"


def train_two_steps(folder: Path, model: str) -> tuple[list[str], Path, Path]:
    """(argv of the run, its folder, its data file): 2 steps trained, one checkpoint at step 2."""
    data = folder / "texts.txt"
    data.write_text(TEXTS, encoding="utf-8")
    output = folder / "run"
    argv = own_data_argv(Path(model), data, output)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code in (0, None)
    assert (output / "checkpoints" / CHECKPOINT / FINGERPRINT_FILE).is_file()
    return argv, output, data


@pytest.fixture(scope="module")
def template(tmp_path_factory, make_tiny_bert):
    """One run shared by every test that resumes a 2-step run (each gets a copy of the run folder)."""
    return train_two_steps(tmp_path_factory.mktemp("template"), make_tiny_bert(hidden_size=32))


@pytest.fixture
def copied(template, tmp_path):
    """(argv, run folder, data file) of a copy of the template run (the data file shared, never changed)."""
    argv, output, data = template
    copy = tmp_path / "run"
    shutil.copytree(output, copy)
    at = argv.index("--output")
    return [*argv[:at], "--output", str(copy), *argv[at + 2:]], copy, data


@pytest.fixture
def trained(copied):
    """A copy of the template run whose data file the test may change: its bytes and times are put back after the
    test, so the next copy's checkpoint matches its data again (the run folders record the data file's path)."""
    data = copied[2]
    text, times = data.read_bytes(), data.stat()
    yield copied
    data.write_bytes(text)
    os.utime(data, ns=(times.st_atime_ns, times.st_mtime_ns))


def resume_argv(argv: list[str], *extra: str, max_steps: int = 4) -> list[str]:
    return [*argv, *with_sets(f"train.max_steps={max_steps}"), "--resume", *extra]


def one_error(argv: list[str], capsys) -> str:
    code, _, stderr = run(argv, capsys)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), stderr
    return lines[0]


def rewrite_state(checkpoint: Path, change) -> None:
    """Apply ``change`` to the checkpoint's trainer_state.json and re-hash its manifest (a forger would)."""
    path = checkpoint / "trainer_state.json"
    state = json.loads(path.read_text(encoding="utf-8"))
    state = change(state)
    path.write_text(json.dumps(state), encoding="utf-8")
    write_manifest(checkpoint)


def set_key(key, value):
    def change(state):
        state[key] = value
        return state

    return change


SCHEMA_FAULTS = {
    "step as a word": (set_key("step", "three"), "'step'"),
    "negative step": (set_key("step", -1), "'step'"),
    "step as a float": (set_key("step", 2.0), "'step'"),
    "step as a boolean": (set_key("step", True), "'step'"),
    "forged step 1000 of 4": (set_key("step", 1000), "'step'"),
    "epoch as a float": (set_key("epoch", 0.5), "'epoch'"),
    "negative samples": (set_key("samples_seen", -8), "'samples_seen'"),
    "best step after the step": (lambda state: {**state, "best_step": 9, "best_metric": 0.5}, "best_step"),
    "stopped_early as text": (set_key("stopped_early", "no"), "'stopped_early'"),
    "not an object": (lambda state: [state], "JSON object"),
}


@pytest.mark.parametrize("fault", SCHEMA_FAULTS)
def test_a_trainer_state_off_its_schema_is_one_line_naming_the_file_and_the_key(
    copied, fault, capsys, no_model_loads
):
    argv, output, _ = copied
    change, key = SCHEMA_FAULTS[fault]
    rewrite_state(output / "checkpoints" / CHECKPOINT, change)
    before = folder_digest(output)
    line = one_error(resume_argv(argv), capsys)
    assert "trainer_state.json" in line and key in line, line
    assert folder_digest(output) == before


def test_a_forged_step_past_the_plan_is_refused_even_with_folder_and_pointer_renamed(copied, capsys, no_model_loads):
    argv, output, _ = copied
    checkpoints = output / "checkpoints"
    forged = checkpoints / "step-001000"
    (checkpoints / CHECKPOINT).rename(forged)
    (checkpoints / "latest").write_text("step-001000\n", encoding="utf-8")
    rewrite_state(forged, set_key("step", 1000))
    before = folder_digest(output)
    line = one_error(resume_argv(argv), capsys)
    assert str(forged / "trainer_state.json") in line and "'step' is 1000" in line and "4 planned steps" in line
    assert folder_digest(output) == before


def test_a_replaced_data_file_is_refused_naming_it(trained, capsys, no_model_loads):
    argv, output, data = trained
    data.write_text(TEXTS.replace("first", "other"), encoding="utf-8")
    before = folder_digest(output), folder_digest(data.parent)
    line = one_error(resume_argv(argv), capsys)
    assert "the training data changed" in line and f"data.path: {data} changed" in line, line
    assert "--resume-allow-data-change" in line
    assert (folder_digest(output), folder_digest(data.parent)) == before


def test_a_replaced_data_file_of_the_same_size_is_refused(trained, capsys, no_model_loads):
    argv, output, data = trained
    data.write_text(TEXTS.replace("first", "fIrst"), encoding="utf-8")
    line = one_error(resume_argv(argv), capsys)
    assert "same size, other content" in line and str(data) in line


def test_a_changed_data_file_is_accepted_with_the_flag_and_a_line(trained, capsys, caplog):
    argv, output, data = trained
    data.write_text(TEXTS.replace("first", "other"), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="contrastext.training"):
        code, _, stderr = run(resume_argv(argv, "--resume-allow-data-change"), capsys)
    assert code == 0, stderr
    said = [record.getMessage() for record in caplog.records if "training data changed" in record.getMessage()]
    assert len(said) == 1 and "continuing on the new data" in said[0] and str(data) in said[0]
    assert json.loads((output / "metrics.json").read_text())["last_step"] == 4
    recorded = read_data_fingerprint(output / "checkpoints" / "step-000004")
    assert recorded["data.path"]["fingerprint"]["size"] == data.stat().st_size  # the new data, from now on
    code, _, stderr = run(resume_argv(argv, max_steps=6), capsys)  # and a resume on it needs no flag
    assert code == 0, stderr


def test_the_data_change_flag_without_a_resume_is_refused(trained, capsys, no_model_loads):
    argv, output, data = trained
    before = folder_digest(output)
    line = one_error([*argv, "--resume-allow-data-change"], capsys)
    assert "--resume-allow-data-change applies to a resume" in line and "--resume" in line
    assert folder_digest(output) == before


def test_the_same_bytes_with_a_new_mtime_are_the_same_data(trained, capsys, caplog):
    argv, output, data = trained
    later = data.stat().st_mtime + 3600
    os.utime(data, (later, later))
    with caplog.at_level(logging.WARNING, logger="contrastext.training"):
        code, _, stderr = run(resume_argv(argv), capsys)
    assert code == 0, stderr
    about_data = ("training data", "could not be verified")
    assert not [record for record in caplog.records if any(text in record.getMessage() for text in about_data)]
    assert json.loads((output / "metrics.json").read_text())["last_step"] == 4


def test_a_checkpoint_without_fingerprint_resumes_with_a_line(copied, capsys, caplog):
    argv, output, _ = copied
    checkpoint = output / "checkpoints" / CHECKPOINT
    (checkpoint / FINGERPRINT_FILE).unlink()
    write_manifest(checkpoint)  # as a checkpoint saved before fingerprints existed
    with caplog.at_level(logging.WARNING, logger="contrastext.training"):
        code, _, stderr = run(resume_argv(argv), capsys)
    assert code == 0, stderr
    said = [record.getMessage() for record in caplog.records if "could not be verified" in record.getMessage()]
    assert len(said) == 1 and str(checkpoint) in said[0]
    assert json.loads((output / "metrics.json").read_text())["last_step"] == 4


def test_resume_from_a_checkpoint_whose_data_changed_is_refused(trained, tmp_path, capsys, no_model_loads):
    argv, output, data = trained
    data.write_text(TEXTS + "one more line\n", encoding="utf-8")
    new = tmp_path / "new"
    before = folder_digest(output)
    at = argv.index("--output")
    moved = [*argv[:at], "--output", str(new), *argv[at + 2:], *with_sets("train.max_steps=4"),
             "--resume-from", str(output / "checkpoints" / CHECKPOINT)]
    line = one_error(moved, capsys)
    assert line.startswith("error: --resume-from: the training data changed") and str(data) in line
    assert folder_digest(output) == before and not new.exists()


def test_a_state_damaged_after_the_fact_is_skipped_not_refused(tmp_path, tiny_bert_path, capsys, caplog):
    """A trainer_state.json that no longer matches its manifest (a bit flip, not a forgery) is the damaged-checkpoint
    case: the resume falls back to the previous intact checkpoint with a warning, as before."""
    data = tmp_path / "texts.txt"
    data.write_text(TEXTS, encoding="utf-8")
    output = tmp_path / "run"
    argv = [*own_data_argv(Path(tiny_bert_path), data, output), *with_sets("train.save_every=1")]
    code, _, stderr = run(argv, capsys)
    assert code == 0, stderr
    state = output / "checkpoints" / CHECKPOINT / "trainer_state.json"
    text = state.read_text(encoding="utf-8")
    state.write_text(text.replace('"step": 2', '"step": x'), encoding="utf-8")  # same size: only a hash sees it
    assert state.read_text(encoding="utf-8") != text
    with caplog.at_level(logging.WARNING, logger="contrastext.training"):
        code, _, stderr = run(resume_argv(argv), capsys)
    assert code == 0, stderr
    assert any("skipping checkpoint step-000002" in record.getMessage() for record in caplog.records)
    assert json.loads((output / "metrics.json").read_text())["last_step"] == 4


def test_a_step_past_an_epoch_plan_is_refused_by_the_trainer_with_nothing_written(tmp_path, tiny_bert_path, capsys):
    """With ``train.epochs`` the plan depends on the data, so the trainer refuses (after the model loads), still
    before anything is written."""
    data = tmp_path / "texts.txt"
    data.write_text(TEXTS, encoding="utf-8")
    output = tmp_path / "run"
    argv = [*own_data_argv(Path(tiny_bert_path), data, output), *with_sets("train.max_steps=null", "train.epochs=1")]
    code, _, stderr = run(argv, capsys)
    assert code == 0, stderr
    steps = json.loads((output / "metrics.json").read_text())["last_step"]  # 24 rows, batch 4: 6 steps
    checkpoints = output / "checkpoints"
    forged = checkpoints / f"step-{steps + 1:06d}"
    (checkpoints / f"step-{steps:06d}").rename(forged)
    (checkpoints / "latest").write_text(forged.name + "\n", encoding="utf-8")
    rewrite_state(forged, set_key("step", steps + 1))
    before = folder_digest(output)
    line = one_error([*argv, "--resume"], capsys)
    assert str(forged / "trainer_state.json") in line and f"beyond the run's {steps} planned steps" in line, line
    assert folder_digest(output) == before
