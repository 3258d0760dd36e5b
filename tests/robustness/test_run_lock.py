"""Fault suite, concurrency (issue 21, item 1): one run per output folder.

A second ``train`` into a folder whose lock is held by a live process (a real second process) is refused with
one ``error:`` line naming the pid and the host, as are ``--resume`` and ``--resume-from`` into it, and the
folder is unchanged; a stale lock (a pid that no longer runs on this host) is taken over with a line saying so;
another host's lock is respected; the lock goes at the end of a run, also on an error or a KeyboardInterrupt.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import contrastext.cli.train_command  # noqa: F401  (registers the command)
from contrastext.runtime.lock import LOCK_NAME, FolderLockedError, acquire, read_lock, release, run_lock
from tests.cli.cli_runs import run
from tests.cli.test_train_command import FAST, RECIPE, with_sets
from tests.robustness.hostile import REPO_ROOT, folder_digest

HOLDER = (
    "import sys, time\n"
    "from contrastext.runtime.lock import acquire\n"
    "acquire(sys.argv[1])\n"
    "print('held', flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def held_folder(tmp_path):
    """A folder whose lock a live second process holds; yields (folder, that process's pid)."""
    folder = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield folder, holder.pid
    finally:
        holder.kill()
        holder.wait()


def dead_pid() -> int:
    """The pid of a process that has ended (nothing runs under it)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def train_argv(output: Path, tiny_bert_path: str, data_root: Path) -> list[str]:
    return ["train", RECIPE, *with_sets(*FAST, "train.max_steps=2", f"model={tiny_bert_path}"),
            "--output", str(output), "--data-root", str(data_root)]


@pytest.mark.parametrize("extra", [[], ["--resume"], ["--resume-from", "elsewhere/checkpoints/step-000002"]])
def test_a_second_run_into_a_folder_held_by_a_live_run_is_refused_naming_the_pid(
    held_folder, extra, tiny_bert_path, data_root, capsys
):
    folder, pid = held_folder
    (folder / "train_log.jsonl").write_text('{"step": 1}\n', encoding="utf-8")
    before = folder_digest(folder)
    code, _, stderr = run([*train_argv(folder, tiny_bert_path, data_root), *extra], capsys)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), stderr
    assert f"pid {pid}" in lines[0] and socket.gethostname() in lines[0] and "in use" in lines[0]
    assert folder_digest(folder) == before  # nothing written, the holder's lock untouched


def test_a_stale_lock_of_a_dead_pid_is_taken_over_with_a_line_and_released_at_the_end(
    tmp_path, tiny_bert_path, data_root, capsys, caplog
):
    folder = tmp_path / "run"
    folder.mkdir()
    pid = dead_pid()
    (folder / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": 0}))
    with caplog.at_level(logging.WARNING, logger="contrastext.runs"):
        code, _, stderr = run(train_argv(folder, tiny_bert_path, data_root), capsys)
    assert code == 0, stderr
    assert any(f"pid {pid}" in record.getMessage() and "no longer running" in record.getMessage()
               for record in caplog.records)
    assert not (folder / LOCK_NAME).exists() and (folder / "final").is_dir()


def test_another_hosts_lock_is_respected_and_names_the_file_to_delete(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_NAME).write_text(json.dumps({"pid": dead_pid(), "host": "another-host.example", "started": 0}))
    with pytest.raises(FolderLockedError, match="another-host.example") as refused:
        acquire(folder)
    assert str(folder.resolve() / LOCK_NAME) in str(refused.value)
    assert read_lock(folder)["host"] == "another-host.example"


@pytest.mark.parametrize("fault", [RuntimeError, KeyboardInterrupt])
def test_the_lock_is_released_on_an_error_or_an_interrupt(tmp_path, fault):
    folder = tmp_path / "run"
    with pytest.raises(fault), run_lock(folder):
        assert read_lock(folder)["pid"] > 0
        raise fault()
    assert not (folder / LOCK_NAME).exists()
    assert not folder.exists()  # created for the lock only, and left empty: removed


def test_the_lock_is_reentrant_in_one_process_and_goes_with_the_outermost_hold(tmp_path):
    with run_lock(tmp_path):
        created = acquire(tmp_path)
        release(tmp_path, created)
        assert (tmp_path / LOCK_NAME).exists()
    assert not (tmp_path / LOCK_NAME).exists()


def test_two_train_processes_started_together_into_one_folder_give_one_run_and_a_log_without_repeats(
    tmp_path, tiny_bert_path, data_root
):
    folder = tmp_path / "run"
    argv = [sys.executable, "-m", "contrastext", *train_argv(folder, tiny_bert_path, data_root)]
    processes = [subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(process.wait(timeout=300), process.communicate()[1]) for process in processes]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(stderr for code, stderr in results if code == 2).strip().splitlines()
    assert len(refused) == 1 and refused[0].startswith("error:")  # the lock (pid) or, if it came late, the run
    steps = [json.loads(line)["step"] for line in (folder / "train_log.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps))
    assert not (folder / LOCK_NAME).exists()
