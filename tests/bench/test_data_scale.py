"""Smoke test of bench/data_scale.py: the generated file is the same every time, one worker trains a step on a
column store and reports its measures, and a --quick run (its workers replaced by canned results) writes its
block with every arm into a markdown file, leaving no temporary file behind."""

from __future__ import annotations

import json

import pytest

from tests.bench._scripts import loaded_bench


@pytest.fixture(scope="module")
def bench():
    with loaded_bench("data_scale") as module:
        yield module


def test_the_generated_file_is_deterministic(bench, tmp_path):
    bench.generate(tmp_path / "a.csv", 250)
    bench.generate(tmp_path / "b.csv", 250)
    text = (tmp_path / "a.csv").read_text()
    assert text == (tmp_path / "b.csv").read_text() and text.count("\n") == 251
    assert all(3 <= len(field.split()) <= 8 for line in text.splitlines()[1:] for field in line.split(","))


@pytest.mark.parametrize("arm", ["columns-first", "no-duplicates"])
def test_a_worker_trains_a_step_on_the_column_store(bench, tmp_path, tiny_bert_path, arm):
    bench.generate(tmp_path / "pairs.csv", 200)
    result = tmp_path / "result.json"
    code = bench.main(["--worker", arm, "--result", str(result), "--file", str(tmp_path / "pairs.csv"),
                       "--cache", str(tmp_path / "cache"), "--batch-size", "8", "--steps", "1", "--model",
                       tiny_bert_path])
    measured = json.loads(result.read_text())
    assert code == 0 and measured["batches"] == 25 and measured["peak_mib"] > 0  # 200 rows / 8
    assert 0 < measured["data_ready"] < measured["first_step"] and measured["loss"] > 0
    assert any((tmp_path / "cache").iterdir())


def test_a_quick_run_writes_its_block(bench, tmp_path, monkeypatch):
    arms = []

    def run_worker(script, arm, result, worker_args, threads, timeout):
        arms.append(arm)
        return {"data_ready": 0.1, "first_step": 1.0, "peak_mib": 500.0, "batches": 187, "loss": 2.0, "wall": 2.0}

    monkeypatch.setattr(bench.child_process, "run_worker", run_worker)
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\n## Another section\n\nkept\n")
    work = tmp_path / "work"
    work.mkdir()
    assert bench.main(["--quick", "--workdir", str(work), "--output", str(output)]) == 0
    assert arms == ["memory", "columns-first", *bench.ARMS]
    text = output.read_text()
    begin, end = bench.markdown_block.markers(bench.SCRIPT)
    assert "kept" in text and begin in text and end in text
    rows = [line for line in text.splitlines() if line.startswith("| 3,000 |")]
    assert len(rows) == len(bench.ARMS) and "every size asked for ran" in text
    assert "| columns, cached, no_duplicates |" in rows[-1]
    assert list(work.iterdir()) == []


def test_arms_can_be_chosen_and_cached_ones_need_the_conversion(bench, capsys):
    args = bench.parse_args(["--quick", "--arms", "no-duplicates,columns-first"])
    assert args.arms == ["columns-first", "no-duplicates"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--arms", "no-duplicates"])
    assert "add columns-first" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.parse_args(["--arms", "columns-first,sorted"])
    assert "unknown arm(s) sorted" in capsys.readouterr().err
