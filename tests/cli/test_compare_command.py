"""``contrastext compare``: two real runs (trained through the CLI) and a multi-seed folder on one plot, and
the table of their last and best metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import contrastext.cli.compare_command  # noqa: F401  (registers the command)
import contrastext.cli.train_command  # noqa: F401
from tests.cli.cli_runs import run

RECIPE = str(Path(__file__).resolve().parents[2] / "recipes" / "simcse-unsup.yaml")
PNG = b"\x89PNG\r\n\x1a\n"


def one_line_error(code: int, stderr: str) -> str:
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, tiny_bert_path, data_root) -> tuple[Path, Path]:
    """Two 3-step runs on the same own sentence file with different learning rates, evaluated on 40 STS-B
    dev pairs at every step, best checkpoint by STS-B dev Spearman."""
    from contrastext.cli import main  # capsys is function-scoped: the module fixture calls main itself

    folder = tmp_path_factory.mktemp("compare")
    sentences = folder / "mine.txt"
    sentences.write_text("".join(f"sentence {i} talks about topic {i % 4}.\n" for i in range(12)), encoding="utf-8")
    runs = []
    for name, lr in (("lr-small", "1e-5"), ("lr-large", "1e-3")):
        output = folder / name
        argv = [
            "train", RECIPE,
            "--set", f"model={tiny_bert_path}", f"data.path={sentences}", "data.task=null", f"train.lr={lr}",
            "train.max_steps=3", "train.batch_size=4", "train.eval_every=1", "train.save_every=null",
            "train.progress_bar=false", "eval.tasks=[stsb:dev]", "eval.limit=40",
            "--output", str(output), "--data-root", str(data_root),
        ]  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code in (0, None), f"training {name} failed"
        runs.append(output)
    return runs[0], runs[1]


def test_two_runs_are_drawn_and_tabulated(two_runs, tmp_path, capsys):
    small, large = two_runs
    out = tmp_path / "cmp" / "both.png"
    code, stdout, stderr = run(["compare", str(small), str(large), "--out", str(out)], capsys)
    assert code == 0, stderr
    assert out.read_bytes()[:8] == PNG
    assert f"plot written to {out}" in stdout
    assert "lr-small" in stdout and "lr-large" in stdout and "stsb_dev_spearman" in stdout
    # the table's "best" of each run is its metrics.json value (the best checkpoint's evaluation)
    for folder in (small, large):
        summary = json.loads((folder / "metrics.json").read_text())
        assert f"{summary['metrics']['stsb_dev_spearman']:.4f}" in stdout


def test_a_multi_seed_folder_counts_as_one_run(two_runs, tmp_path, capsys):
    """Both runs copied as seed-1/ and seed-2/ of one folder: compared as mean ± std over 2 seeds."""
    import shutil

    small, large = two_runs
    seeds = tmp_path / "seeds"
    for index, folder in enumerate((small, large), start=1):
        target = seeds / f"seed-{index}"
        target.mkdir(parents=True)
        for name in ("train_log.jsonl", "config.yaml"):
            shutil.copy(folder / name, target / name)
    out = tmp_path / "seeds.png"
    code, stdout, stderr = run(
        ["compare", str(small), str(seeds), "--out", str(out), "--metric", "stsb_dev_spearman"], capsys
    )
    assert code == 0, stderr
    assert out.read_bytes()[:8] == PNG
    assert "(2 seeds)" in stdout and "±" in stdout

    code, stdout, stderr = run(["plot", str(seeds), "--out", str(tmp_path / "plots")], capsys)
    assert code == 0, stderr
    assert "2 seeds (seed-1, seed-2)" in stdout and (tmp_path / "plots" / "eval.png").read_bytes()[:8] == PNG


def test_bad_input_is_one_line(two_runs, tmp_path, capsys):
    small, _ = two_runs
    message = one_line_error(*run(["compare", str(small), str(tmp_path / "nope")], capsys)[::2])
    assert "no training log" in message and "nope" in message
    message = one_line_error(*run(["compare", str(small), "--metric", "stsb_test_spearman"], capsys)[::2])
    assert "--metric stsb_test_spearman" in message and "stsb_dev_spearman" in message
    message = one_line_error(*run(["compare", str(small), "--out", str(tmp_path / "x.pdf")], capsys)[::2])
    assert ".png" in message


def test_seed_folders_are_paired_by_seed_against_the_first(two_runs, tmp_path, capsys):
    """Folder a holds the small-lr run as seed-1 and seed-2, folder b the large-lr run: each pair differs by the
    two runs' best values, so Δ is that difference, the interval has no width and the exact sign-flip p over
    2 seeds is 2 of 4 sign vectors."""
    import shutil

    small, large = two_runs
    for name, source in (("a", small), ("b", large)):
        for seed in (1, 2):
            target = tmp_path / name / f"seed-{seed}"
            target.mkdir(parents=True)
            for file in ("train_log.jsonl", "config.yaml"):
                shutil.copy(source / file, target / file)
    out = tmp_path / "paired.png"
    code, stdout, stderr = run(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out),
                                "--metric", "stsb_dev_spearman"], capsys)  # fmt: skip
    assert code == 0, stderr
    best = [json.loads((folder / "metrics.json").read_text())["metrics"]["stsb_dev_spearman"] for folder in two_runs]
    delta = best[1] - best[0]
    assert "paired by seed against" in stdout
    row = next(line for line in stdout.splitlines() if "stsb_dev_spearman" in line and f"{delta:+.4f}" in line)
    assert f"[{delta:+.4f}, {delta:+.4f}]" in row and "0.5" in row
