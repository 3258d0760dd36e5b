"""Data the evaluation cannot use is a one-line error naming the file (issue 10): gold scores outside the range the
task registry declares, empty files, header-only files, empty STS subsets, all-blank gold files, unreadable files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from contrastext.data import formats
from contrastext.data.tasks import TASKS, load_task
from contrastext.errors import DataFormatError, EmptyDataError

STSB = "stsb/original/sts-dev.csv"
SICK = "senteval/downstream/SICK/SICK_trial.txt"
STS12 = "senteval/downstream/STS/STS12-en-test"
GLUE_STSB = "glue/STS-B/dev.tsv"
MINBERT_STS = "minbert/sts-dev.csv"
SST2 = "glue/SST-2/train.tsv"


def copy_head(data_root: Path, root: Path, relative: str, lines: int = 6) -> Path:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    with (data_root / relative).open("rb") as handle:
        target.write_bytes(b"".join(line for _, line in zip(range(lines), handle, strict=False)))
    return target


def replace_field(path: Path, line: int, column: int, value: str, separator: str = "\t") -> None:
    rows = path.read_text(encoding="utf-8").split("\n")
    fields = rows[line - 1].split(separator)
    fields[column] = value
    rows[line - 1] = separator.join(fields)
    path.write_text("\n".join(rows), encoding="utf-8")


def test_similarity_tasks_declare_their_score_range():
    expected = {
        "stsb": (0.0, 5.0),
        "sickr": (1.0, 5.0),
        "stsb-glue": (0.0, 5.0),
        "minbert-sts": (0.0, 5.0),
        **{f"sts{year}": (0.0, 5.0) for year in range(12, 17)},
    }
    assert {name: task.score_range for name, task in TASKS.items() if task.score_range} == expected
    assert all(task.score_range for task in TASKS.values() if task.kind in ("sts", "regression"))


@pytest.mark.parametrize("value", ["500", "-3", "5.01"])
@pytest.mark.parametrize(
    ("spec", "relative", "column", "line"),
    [
        ("stsb:dev", STSB, 4, 2),
        ("sickr:dev", SICK, 3, 3),
        ("stsb-glue:dev", GLUE_STSB, -1, 3),
        ("minbert-sts:dev", MINBERT_STS, -1, 3),
    ],
)
def test_gold_scores_outside_the_range_name_file_and_line(data_root, tmp_path, spec, relative, column, line, value):
    path = copy_head(data_root, tmp_path, relative)
    replace_field(path, line, column, value)
    with pytest.raises(DataFormatError, match=rf"^{path}:{line}: .*outside the range"):
        load_task(spec, tmp_path)


def test_sts12_gold_outside_the_range_names_the_gold_file(data_root, tmp_path):
    for source in (data_root / STS12).glob("STS.*.txt"):
        copy_head(data_root, tmp_path, f"{STS12}/{source.name}")
    gold = tmp_path / STS12 / "STS.gs.MSRvid.txt"
    rows = gold.read_text().split("\n")
    rows[3] = "-3"
    gold.write_text("\n".join(rows))
    with pytest.raises(DataFormatError, match=rf"^{gold}:4: .*score -3 is outside the range 0-5"):
        load_task("sts12", tmp_path)


def test_the_range_bounds_are_inclusive(data_root, tmp_path):
    path = copy_head(data_root, tmp_path, SICK)
    replace_field(path, 2, 3, "1")
    replace_field(path, 3, 3, "5.0")
    assert [e.label for e in load_task("sickr:dev", tmp_path).examples][:2] == [1.0, 5.0]
    assert formats.read_sick(path)[0].label == 1.0  # the reader alone has no range


@pytest.mark.parametrize(
    ("spec", "relative", "content"),
    [
        ("stsb:dev", STSB, b""),
        ("sickr:dev", SICK, b""),
        ("sickr:dev", SICK, b"pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"),
        ("sst2:train", SST2, b"sentence\tlabel\n"),
        ("stsb-glue:dev", GLUE_STSB, b"index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"),
        ("wiki1m", "wiki1m/wiki1m_for_simcse.head11914.txt", b"\n\n"),
    ],
)
def test_a_split_without_examples_is_an_error_naming_the_file(tmp_path, spec, relative, content):
    path = tmp_path / relative
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(EmptyDataError) as caught:
        load_task(spec, tmp_path)
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message


def sts12_copy(data_root: Path, root: Path) -> Path:
    folder = root / STS12
    shutil.copytree(data_root / STS12, folder)
    return folder


def test_an_empty_sts12_subset_names_its_input_file(data_root, tmp_path):
    folder = sts12_copy(data_root, tmp_path)
    (folder / "STS.input.MSRpar.txt").write_bytes(b"")
    (folder / "STS.gs.MSRpar.txt").write_bytes(b"")
    with pytest.raises(DataFormatError, match=rf"^{folder / 'STS.input.MSRpar.txt'}: the file is empty"):
        load_task("sts12", tmp_path)


def test_an_sts12_subset_with_all_gold_lines_blank_names_the_gold_file(data_root, tmp_path):
    folder = sts12_copy(data_root, tmp_path)
    lines = (folder / "STS.input.MSRvid.txt").read_bytes().count(b"\n")
    (folder / "STS.gs.MSRvid.txt").write_bytes(b"\n" * lines)
    with pytest.raises(DataFormatError, match=rf"^{folder / 'STS.gs.MSRvid.txt'}: no scored pair: all {lines}"):
        load_task("sts12", tmp_path)


def test_some_blank_gold_lines_are_still_skipped_and_counted(data_root, tmp_path):
    folder = sts12_copy(data_root, tmp_path)
    rows = (folder / "STS.gs.MSRvid.txt").read_text().split("\n")
    rows[0] = rows[1] = ""
    (folder / "STS.gs.MSRvid.txt").write_text("\n".join(rows))
    assert load_task("sts12", tmp_path).skipped == 2


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions")
def test_an_unreadable_file_is_a_one_line_error(data_root, tmp_path):
    path = copy_head(data_root, tmp_path, STSB)
    path.chmod(0)
    with pytest.raises(DataFormatError, match=rf"^{path}: cannot read the file"):
        load_task("stsb:dev", tmp_path)


def test_an_unopenable_file_is_a_one_line_error(data_root, tmp_path, monkeypatch):
    """The same path as above, reached as root too by making ``open`` fail."""
    path = copy_head(data_root, tmp_path, STSB)

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(DataFormatError, match=rf"^{path}: cannot read the file \(Permission denied\)"):
        formats.read_stsb_csv(path)


def test_a_lone_cr_stays_inside_its_line(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_bytes(b"one\rstill one\ntwo\r\nthree")
    examples = formats.read_sentences(path)
    assert [example.texts[0] for example in examples] == ["one\rstill one", "two", "three"]
    assert [example.source for example in examples] == [f"{path}:1", f"{path}:2", f"{path}:3"]
