"""Fault suite, full and read-only disks (issue 21, item 2), on a small tmpfs mounted for the test (root only;
skipped with the reason elsewhere).

``train`` into a read-only folder, or onto a disk without room for one checkpoint, is refused before any model
loads; a disk that fills up during the run is one ``error:`` line, exit 2, with no half-written checkpoint left
and the lock released; ``encode`` onto a full disk leaves the old output file as it was and no temporary.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import contrastext.cli.encode_command  # noqa: F401  (registers the commands)
import contrastext.cli.train_command  # noqa: F401
from contrastext.runtime.lock import LOCK_NAME
from contrastext.runtime.paths import weights_bytes
from tests.cli.cli_runs import run
from tests.robustness.hostile import folder_digest
from tests.robustness.test_outputs_apart_from_inputs import TEXTS, own_data_argv


@pytest.fixture
def tmpfs(tmp_path):
    """mount(size, read_only=False) -> a fresh tmpfs folder, unmounted at the end."""
    mounted: list[Path] = []

    def mount(size: int, read_only: bool = False) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode(errors='replace').strip() or 'not root'})")
        mounted.append(folder)
        return folder

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    yield mount
    for folder in mounted:
        subprocess.run(["umount", str(folder)], capture_output=True)


@pytest.fixture
def texts(tmp_path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text(TEXTS, encoding="utf-8")
    return path


def one_error(argv, capsys) -> str:
    code, _, stderr = run(argv, capsys)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), stderr
    return lines[0]


def test_train_onto_a_read_only_disk_is_refused_before_the_model_loads(tmpfs, texts, tiny_bert_path, capsys,
                                                                      no_model_loads):
    disk = tmpfs(1 << 20, read_only=True)
    line = one_error(own_data_argv(Path(tiny_bert_path), texts, disk / "run"), capsys)
    assert "read-only" in line and str(disk) in line


def test_train_onto_a_disk_without_room_for_a_checkpoint_is_refused_first(tmpfs, texts, tiny_bert_path, capsys,
                                                                         no_model_loads):
    disk = tmpfs(64 * 1024)
    line = one_error(own_data_argv(Path(tiny_bert_path), texts, disk / "run"), capsys)
    assert "MiB free" in line and "checkpoint" in line
    assert folder_digest(disk) == {} and not (disk / "run").exists()


def test_a_disk_that_fills_up_during_training_is_one_line_and_leaves_no_half_checkpoint(tmpfs, texts,
                                                                                        tiny_bert_path, capsys):
    disk = tmpfs(3 * weights_bytes(tiny_bert_path) + 200_000)  # passes the check, fills at the first checkpoint
    argv = own_data_argv(Path(tiny_bert_path), texts, disk / "run")
    line = one_error([*argv, "--set", "train.save_every=1"], capsys)
    assert "No space left on device" in line
    leftovers = [path for path in (disk / "run").rglob("*") if path.name.startswith(".contrastext-tmp")]
    assert leftovers == [] and not (disk / "run" / LOCK_NAME).exists()


def test_encode_onto_a_full_disk_keeps_the_old_file_and_leaves_no_temporary(tmpfs, texts, tiny_bert_path, capsys):
    disk = tmpfs(64 * 1024)
    old = disk / "out.npy"
    old.write_bytes(b"the previous embeddings")
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle, pytest.raises(OSError):
        while True:
            handle.write(b"\0" * 4096)
    before = old.read_bytes()
    line = one_error(["encode", "-m", tiny_bert_path, "-i", str(texts), "-o", str(old), "--no-progress"], capsys)
    assert "No space left on device" in line and "--output" in line
    assert old.read_bytes() == before
    assert sorted(path.name for path in disk.iterdir()) == ["filler", "out.npy"]
