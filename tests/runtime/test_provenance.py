"""Provenance: the git state (clean, dirty, none), the versions, the machine, CPU against wall time."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from contrastext.runtime import provenance as provenance_module
from contrastext.runtime.fingerprint import data_fingerprints
from contrastext.runtime.provenance import git_state, process_times, provenance, provenance_line

GIT = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]


def _repository(folder) -> str:
    subprocess.run([*GIT, "init", "-q", str(folder)], check=True)
    (folder / "a.txt").write_text("a\n")
    subprocess.run([*GIT, "-C", str(folder), "add", "a.txt"], check=True)
    subprocess.run([*GIT, "-C", str(folder), "commit", "-q", "-m", "first"], check=True)
    return subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_every_field_is_there_and_the_record_is_json(tmp_path):
    data_file = tmp_path / "pairs.csv"
    data_file.write_text("a,b\nx,y\n")
    data = data_fingerprints([("data.path", str(data_file))])
    record = provenance(data=data, config={"seed": 1})
    for key in ("git_commit", "git_dirty", "python", "versions", "torch_threads", "cpu_count", "cpu_model",
                "cpu_time_s", "wall_time_s", "recorded_at"):
        assert key in record, key
    assert set(record["versions"]) >= {"python", "torch", "transformers", "datasets", "faiss", "contrastext"}
    assert record["versions"]["torch"] and record["torch_threads"] >= 1
    assert record["data"]["data.path"]["fingerprint"]["sha256"] == data["data.path"]["fingerprint"]["sha256"]
    assert record["config"] == {"seed": 1}
    assert json.loads(json.dumps(record)) == record
    assert record["python"] in provenance_line(record)


def test_a_clean_checkout_then_a_modified_and_an_untracked_file_are_dirty(tmp_path):
    commit = _repository(tmp_path)
    clean = git_state(tmp_path)
    assert clean["git_commit"] == commit and clean["git_dirty"] is False
    (tmp_path / "new.txt").write_text("untracked\n")
    assert git_state(tmp_path)["git_dirty"] is True
    (tmp_path / "new.txt").unlink()
    (tmp_path / "a.txt").write_text("changed\n")
    assert git_state(tmp_path)["git_dirty"] is True
    assert provenance(repository=tmp_path)["git_commit"] == commit


def test_the_files_a_run_writes_itself_do_not_make_the_tree_dirty(tmp_path):
    _repository(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "exp.json").write_text("[]\n")
    (tmp_path / "results" / "exp-delta.png").write_text("png\n")
    assert git_state(tmp_path)["git_dirty"] is True
    outputs = ("results/exp.*", "results/exp-*")
    assert git_state(tmp_path, outputs)["git_dirty"] is False
    assert provenance(repository=tmp_path / "results", outputs=outputs)["git_dirty"] is False  # from a subfolder
    (tmp_path / "results" / "other.json").write_text("[]\n")
    assert git_state(tmp_path, outputs)["git_dirty"] is True


def test_no_git_checkout_gives_nulls_without_failing(tmp_path, monkeypatch):
    folder = tmp_path / "plain"
    folder.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # git must not find a checkout above tmp_path
    assert git_state(folder) == {"git_repository": None, "git_commit": None, "git_dirty": None}
    monkeypatch.setenv("PATH", "")  # no git at all
    assert git_state(folder)["git_commit"] is None
    assert "no git checkout" in provenance_line(provenance(repository=folder))


def test_an_absent_package_has_a_null_version(monkeypatch):
    monkeypatch.setitem(provenance_module.PACKAGES, "nothing", ("no-such-distribution-xyz",))
    assert provenance_module.versions()["nothing"] is None


def test_cpu_time_and_wall_time_are_sane():
    before = process_times()
    deadline = time.process_time() + 0.1
    while time.process_time() < deadline:  # burn a little CPU
        pass
    after = process_times()
    assert 0 < before["cpu_time_s"] <= after["cpu_time_s"]
    # os.times() counts clock ticks (0.01 s on Linux): each reading can lag by up to a tick, and user + system by two
    assert after["cpu_time_s"] - before["cpu_time_s"] >= 0.08
    assert 0 < before["wall_time_s"] <= after["wall_time_s"] < 7 * 24 * 3600
    assert after["cpu_per_wall"] == pytest.approx(after["cpu_time_s"] / after["wall_time_s"], rel=0.01)
