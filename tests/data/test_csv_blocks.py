"""data/readers/csv_blocks.py: a CSV / TSV file read in blocks gives the rows, texts, line numbers and errors of the
exact reader (the csv module row by row), whether a block is read by Arrow's kernels or by the csv module."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contrastext.data.readers import csv_blocks as blocks_module
from contrastext.data.readers.csv_blocks import PYTHON_WHITESPACE, csv_blocks
from contrastext.data.readers.lines import iter_csv_rows, require_columns, require_text
from contrastext.errors import DataFormatError

COLUMNS = ["anchor", "positive"]


def exact_rows(path: Path, columns=COLUMNS, delimiter=","):
    """The reference: the csv module row by row, checked as the in-memory reader checks (written from
    readers/lines.py's rules, not from csv_blocks)."""
    records = iter_csv_rows(path, delimiter=delimiter)
    line, fields = next(records)
    header = [name.strip() for name in fields]
    positions = [header.index(name) for name in columns]
    rows = []
    for line, fields in records:
        require_columns(path, line, fields, header)
        rows.append((line, tuple(require_text(path, line, fields[index], header[index]) for index in positions)))
    return rows


def block_rows(path: Path, columns=COLUMNS, delimiter=","):
    rows = []
    for block in csv_blocks(path, columns, delimiter=delimiter):
        texts = [text.to_pylist() for text in block.texts]
        rows += [(int(line), tuple(column[i] for column in texts)) for i, line in enumerate(block.lines.tolist())]
    return rows


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 64 bytes, so that a few lines make several blocks and quoted records cross block ends."""
    monkeypatch.setattr(blocks_module, "BLOCK_BYTES", 64)


@pytest.fixture
def exact_calls(monkeypatch):
    """How many times the exact reader ran (the header is one)."""
    calls = []
    original = blocks_module._exact_records

    def counted(*args, **kwargs):
        calls.append(args[2])
        return original(*args, **kwargs)

    monkeypatch.setattr(blocks_module, "_exact_records", counted)
    return calls


PLAIN = "anchor,positive\n" + "".join(f"question {i}, its answer {i}\n" for i in range(40))


def test_plain_lines_are_read_by_the_kernels_with_the_exact_rows(tmp_path, small_blocks, exact_calls):
    path = tmp_path / "plain.csv"
    path.write_text(PLAIN)
    assert block_rows(path) == exact_rows(path) and len(exact_rows(path)) == 40
    assert exact_calls == [0]  # the header only


@pytest.mark.parametrize(
    "body",
    [
        # quoted fields, one spanning lines and block ends, among plain lines
        "".join(f"q {i},a {i}\n" for i in range(10)) + '"a, quoted\nanchor\nover lines",b\n'
        + "".join(f"q {i},a {i}\n" for i in range(10, 30)) + 'x,"y ""z"""\n' + "last,row",
        # CRLF line ends, and Unicode whitespace that str.strip() removes around the texts
        "".join(f"\u00a0q {i}\u3000,\x1ca {i}\u2029\r\n" for i in range(30)),
        # non-ASCII texts, a byte-order mark is only for line 1, a line longer than a block
        "".join(f"ünï {i},\ufeffçødé {i}\n" for i in range(20)) + "long," + "word " * 40 + "\n" + "end,end\n",
        # rows whose texts are blank once tokenised stay rows here (the converter drops them)
        "".join(f"q {i},\u200b\u200f\n" for i in range(12)),
    ],
    ids=["quoted", "crlf-unicode-space", "non-ascii-long", "blank-looking"],
)
def test_every_kind_of_line_gives_the_exact_rows(tmp_path, small_blocks, body):
    path = tmp_path / "pairs.csv"
    path.write_bytes(("\ufeffanchor,positive\n" + body).encode())
    assert block_rows(path) == exact_rows(path)


def test_a_tsv_file_and_a_wider_header_read_the_named_columns(tmp_path, small_blocks, exact_calls):
    path = tmp_path / "pairs.tsv"
    path.write_text("id\tpositive\tanchor\n" + "".join(f"{i}\tp, {i}\ta {i}\n" for i in range(30)))
    assert block_rows(path, delimiter="\t") == exact_rows(path, delimiter="\t")
    assert block_rows(path, delimiter="\t")[0] == (2, ("a 0", "p, 0"))
    assert exact_calls.count(0) == 2  # the kernels read every block


def test_the_whitespace_stripped_is_python_s():
    assert PYTHON_WHITESPACE.strip() == "" and all(char.isspace() for char in PYTHON_WHITESPACE)
    assert len(PYTHON_WHITESPACE) == sum(chr(code).isspace() for code in range(0x110000))


BAD = {
    "wrong width": "".join(f"q {i},a {i}\n" for i in range(12)) + "q,a,extra\n" + "q,a\n",
    "empty text": "".join(f"q {i},a {i}\n" for i in range(12)) + "q, \u3000\n",
    "blank line": "".join(f"q {i},a {i}\n" for i in range(12)) + "\n",
    "stray carriage return": "".join(f"q {i},a {i}\n" for i in range(12)) + "q\r,a\n",
    "bad quoting": "".join(f"q {i},a {i}\n" for i in range(12)) + 'q,"a"b\n',
}


@pytest.mark.parametrize("body", list(BAD.values()), ids=list(BAD))
def test_a_bad_line_is_the_exact_reader_s_error(tmp_path, small_blocks, body):
    path = tmp_path / "bad.csv"
    path.write_text("anchor,positive\n" + body, newline="")
    with pytest.raises(DataFormatError) as expected:
        exact_rows(path)
    with pytest.raises(DataFormatError) as error:
        block_rows(path)
    assert str(error.value) == str(expected.value) and "bad.csv:14" in str(error.value)


def test_invalid_utf8_names_its_line(tmp_path, small_blocks):
    path = tmp_path / "bytes.csv"
    path.write_bytes(b"anchor,positive\n" + b"".join(b"q %d,a %d\n" % (i, i) for i in range(12)) + b"q,\xff\n")
    with pytest.raises(DataFormatError, match=r"bytes\.csv:14.*not valid UTF-8"):
        block_rows(path)


def test_an_empty_file_and_a_missing_column_are_errors(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataFormatError, match="the file is empty"):
        block_rows(empty)
    other = tmp_path / "other.csv"
    other.write_text("anchor,answer\na,b\n")
    with pytest.raises(DataFormatError, match=r"other\.csv:1.*expected a header row naming the columns"):
        block_rows(other)


def test_a_line_over_the_csv_module_s_field_limit_goes_to_the_csv_module(tmp_path, monkeypatch, exact_calls):
    monkeypatch.setattr(csv, "field_size_limit", lambda: 50)  # what the kernels compare with
    path = tmp_path / "long.csv"
    path.write_text("anchor,positive\nq,a\n" + "q," + "x" * 200 + "\n")
    rows = block_rows(path)  # the real limit (131,072) holds in the csv module: the exact reader reads it
    assert rows == exact_rows(path) and rows[-1][1][1] == "x" * 200 and exact_calls == [0, len("anchor,positive\n")]


def test_only_the_blocks_with_a_quoted_record_go_to_the_csv_module(tmp_path, small_blocks, exact_calls):
    path = tmp_path / "quoted.csv"
    path.write_text("anchor,positive\n" + "".join(f"q {i},a {i}\n" for i in range(10)) + '"a, quoted\nanchor",b\n'
                    + "".join(f"q {i},a {i}\n" for i in range(10, 30)))  # fmt: skip
    assert block_rows(path) == exact_rows(path)
    assert len(exact_calls) == 2  # the header, and the block where the quoted record starts


PIECES = ["word", "two words", ",", '"', '""', "\r", "\n", "\r\n", " ", "\t", "\u00a0", "\u3000", "é", "\u200b",
          "\x00", "\ufeff"]  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.lists(st.one_of(st.sampled_from(PIECES), st.binary(min_size=1, max_size=2)), min_size=1, max_size=60),
    block_bytes=st.integers(min_value=1, max_value=96),
    delimiter=st.sampled_from([",", "\t"]),
)
def test_any_file_gives_the_exact_reader_s_rows_or_its_error(tmp_path, body, block_bytes, delimiter):
    """Random files of quotes, line ends, delimiters, Unicode spaces, NULs and stray bytes, in blocks of 1–96 bytes:
    the same rows, or the same DataFormatError."""
    path = tmp_path / "fuzz.csv"
    data = b"".join(piece.encode() if isinstance(piece, str) else piece for piece in body)
    path.write_bytes(f"anchor{delimiter}positive\n".encode() + data)
    saved = blocks_module.BLOCK_BYTES
    blocks_module.BLOCK_BYTES = block_bytes
    try:
        outcomes = []
        for read in (exact_rows, block_rows):
            try:
                outcomes.append(("rows", read(path, delimiter=delimiter)))
            except DataFormatError as error:
                outcomes.append(("error", str(error)))
    finally:
        blocks_module.BLOCK_BYTES = saved
    assert outcomes[1] == outcomes[0]
