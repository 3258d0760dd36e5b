"""The run-log reader: a torn last line (a kill mid-write) is dropped with a warning; other bad lines are errors."""

from __future__ import annotations

import logging

import pytest

from contrastext.errors import DataFormatError, MissingDataError
from contrastext.runtime.run_log import read_log

GOOD = b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n'


@pytest.mark.parametrize("torn", [b'{"step": 3, "lo', b'{"step": 3, "loss": 1.', b"\xe2\x82", b"{"])
def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path, caplog, torn):
    """It used to make read_log raise, which blocked --resume and plot."""
    path = tmp_path / "train_log.jsonl"
    path.write_bytes(GOOD + torn)
    with caplog.at_level(logging.WARNING, logger="contrastext.runtime"):
        records = read_log(path)
    assert [record["step"] for record in records] == [1, 2]
    assert f"{path}:3" in caplog.text and "torn" in caplog.text


def test_a_complete_last_record_without_newline_is_kept(tmp_path):
    path = tmp_path / "train_log.jsonl"
    path.write_bytes(GOOD + b'{"step": 3}')
    assert [record["step"] for record in read_log(path)] == [1, 2, 3]


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        (b'{"step": 1}\nnot json\n{"step": 3}\n', 2, "not valid JSON"),
        (b'{"step": 1}\nnot json\n', 2, "not valid JSON"),  # a complete (newline-ended) bad last line
        (b'{"step": 1}\n[1, 2]\n', 2, "JSON object"),
        (b'{"step": 1}\n{"a": "\xff"}\n{"step": 3}\n', 2, "UTF-8"),
    ],
)
def test_other_bad_lines_are_errors_naming_file_and_line(tmp_path, content, line, reason):
    path = tmp_path / "train_log.jsonl"
    path.write_bytes(content)
    with pytest.raises(DataFormatError, match=rf"train_log.jsonl:{line}: .*{reason}"):
        read_log(path)


def test_blank_lines_and_missing_logs(tmp_path):
    path = tmp_path / "train_log.jsonl"
    path.write_bytes(b"\n" + GOOD + b"\n\n")
    assert len(read_log(path)) == 2
    with pytest.raises(MissingDataError, match="no training log"):
        read_log(tmp_path / "absent.jsonl")


def test_resume_rewrites_a_log_with_a_torn_line(tmp_path):
    from contrastext.training.logging import RunLogger

    path = tmp_path / "train_log.jsonl"
    path.write_bytes(GOOD + b'{"step": 3, "lo')
    logger = RunLogger(tmp_path, tensorboard=False)
    logger.truncate_after(2)
    logger.log({"step": 3, "loss": 1.0})
    assert [record["step"] for record in read_log(path)] == [1, 2, 3]
