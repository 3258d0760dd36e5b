"""Property-based tests of every reader on mutated real files (issue 10).

Each reader gets a few rows of its real benchmark file(s); hypothesis then damages one file: deleted or
duplicated columns, inserted random bytes, a byte-order mark, CRLF endings, lone CRs, NULs, a huge line, a
truncation, deleted or duplicated lines. Whatever the damage, the reader must either

- return examples whose texts are non-empty strings and whose ``source`` is ``file:line`` of a real line, the
  same examples when read twice; or
- raise a :class:`~contrastext.errors.ContrastextError` whose message names the file (and, for a
  :class:`~contrastext.errors.DataFormatError` with a line, a line that exists).

Anything else (an IndexError, a UnicodeDecodeError, a csv.Error...) is a bug. Example counts are small so the
module runs in well under a minute.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contrastext.data import formats
from contrastext.data.examples import Example
from contrastext.errors import ContrastextError, DataFormatError

EXAMPLES_PER_READER = 20
SEED_ROWS = 6
HUGE = 300_000  # above the csv module's 131,072-character field limit

SST = "senteval/downstream/SST"
SNLI = "senteval/downstream/SNLI"
STS12 = "senteval/downstream/STS/STS12-en-test"


@dataclass(frozen=True)
class Reader:
    """A reader, the real files it reads (relative to the data root) and how to call it on their folder."""

    name: str
    files: tuple[str, ...]
    call: Callable[[Path], object]


def one_file(name: str, relative: str, read: Callable) -> Reader:
    return Reader(name, (relative,), lambda folder: read(folder / Path(relative).name))


READERS = [
    one_file("stsb_csv", "stsb/original/sts-dev.csv", partial(formats.read_stsb_csv, score_range=(0, 5))),
    one_file("glue_stsb", "glue/STS-B/dev.tsv", partial(formats.read_glue_stsb, score_range=(0, 5))),
    one_file("glue_sst2", "glue/SST-2/dev.tsv", formats.read_glue_sst2),
    one_file("glue_mrpc", "glue/MRPC/dev.tsv", formats.read_glue_mrpc),
    one_file("glue_cola", "glue/CoLA/dev.tsv", formats.read_glue_cola),
    one_file("glue_rte", "glue/RTE/dev.tsv", formats.read_glue_rte),
    one_file("glue_qnli", "glue/QNLI/dev.tsv", formats.read_glue_qnli),
    one_file("glue_qqp", "glue/QQP/subset_dev_23497.tsv", formats.read_glue_qqp),
    one_file("senteval_sst_binary", f"{SST}/binary/sentiment-dev", partial(formats.read_senteval_sst, num_labels=2)),
    one_file("senteval_sst_fine", f"{SST}/fine/sentiment-dev", partial(formats.read_senteval_sst, num_labels=5)),
    one_file("senteval_mrpc", "senteval/downstream/MRPC/msr_paraphrase_train.txt", formats.read_senteval_mrpc),
    Reader(
        "senteval_snli",
        (f"{SNLI}/s1.dev", f"{SNLI}/s2.dev", f"{SNLI}/labels.dev"),
        lambda folder: formats.read_senteval_snli(folder / "s1.dev"),
    ),
    one_file("sick_relatedness", "senteval/downstream/SICK/SICK_trial.txt", partial(formats.read_sick, score_range=(1, 5))),
    one_file("sick_entailment", "senteval/downstream/SICK/SICK_trial.txt", partial(formats.read_sick, target="entailment")),
    Reader(
        "sts_subset",
        (f"{STS12}/STS.input.MSRvid.txt", f"{STS12}/STS.gs.MSRvid.txt"),
        lambda folder: formats.read_sts_subset(
            folder / "STS.input.MSRvid.txt", folder / "STS.gs.MSRvid.txt", score_range=(0, 5)
        ),
    ),
    Reader(
        "senteval_sts_folder",
        tuple(f"{STS12}/STS.{kind}.{subset}.txt" for subset in ("MSRpar", "SMTeuroparl") for kind in ("input", "gs")),
        lambda folder: formats.read_senteval_sts(folder, score_range=(0, 5)),
    ),
    one_file("sentences", "wiki1m/wiki1m_for_simcse.head11914.txt", formats.read_sentences),
    one_file("sentences_strict", "wiki1m/wiki1m_for_simcse.head11914.txt", partial(formats.read_sentences, blank_lines="raise")),
    one_file("simcse_csv", "nli/snli_devtest_for_simcse.csv", formats.read_simcse_csv),
    one_file("minbert_sst", "minbert/ids-sst-dev.csv", formats.read_minbert_sst),
    one_file("minbert_sts", "minbert/sts-dev.csv", partial(formats.read_minbert_sts, score_range=(0, 5))),
    one_file("minbert_quora", "minbert/quora-dev.csv", partial(formats.read_minbert_quora, on_bad_label="skip")),
    one_file(
        "table_csv",
        "nli/snli_devtest_for_simcse.csv",
        partial(formats.read_table, text_columns=["sent0", "sent1"]),
    ),
    one_file(
        "table_tsv",
        "glue/SST-2/dev.tsv",
        partial(formats.read_table, text_columns=["sentence"], label_column="label", file_format="tsv"),
    ),
    Reader(
        "table_jsonl",
        ("generated/pairs.jsonl",),
        lambda folder: formats.read_table(folder / "pairs.jsonl", ["s1", "s2"], "score", label_type="float"),
    ),
]


def _seed_jsonl(data_root: Path) -> bytes:
    rows = (data_root / "glue/STS-B/dev.tsv").read_text(encoding="utf-8").splitlines()[1 : SEED_ROWS + 1]
    records = []
    for row in rows:
        fields = row.split("\t")
        records.append(json.dumps({"s1": fields[-3], "s2": fields[-2], "score": float(fields[-1])}))
    return ("\n".join(records) + "\n").encode("utf-8")


@pytest.fixture(scope="module")
def seeds(data_root: Path) -> dict[str, dict[str, bytes]]:
    """``{reader name: {file name: first rows of the real file}}``."""
    result = {}
    for reader in READERS:
        files = {}
        for relative in reader.files:
            if relative.startswith("generated/"):
                files[Path(relative).name] = _seed_jsonl(data_root)
                continue
            with (data_root / relative).open("rb") as handle:
                files[Path(relative).name] = b"".join(line for _, line in zip(range(SEED_ROWS), handle, strict=False))
        result[reader.name] = files
    return result


# ----------------------------------------------------------------------------------------------- mutations

MUTATIONS = (
    "delete_column",
    "duplicate_column",
    "random_bytes",
    "bom",
    "crlf",
    "lone_cr",
    "nul",
    "huge_line",
    "truncate",
    "empty",
    "delete_line",
    "duplicate_line",
    "blank_line",
)


def _split_lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _separator(line: bytes) -> bytes:
    return b"\t" if b"\t" in line else (b"," if b"," in line else b" ")


def mutate(data: bytes, kind: str, a: int, b: int, payload: bytes) -> bytes:
    """Apply one mutation; ``a`` and ``b`` pick positions (taken modulo the sizes), ``payload`` random bytes."""
    lines = _split_lines(data)
    index = a % len(lines)
    position = a % (len(data) + 1)
    if kind in ("delete_column", "duplicate_column"):
        separator = _separator(lines[index])
        fields = lines[index].split(separator)
        column = b % len(fields)
        fields.insert(column, fields[column]) if kind == "duplicate_column" else fields.pop(column)
        lines[index] = separator.join(fields)
        return b"\n".join(lines)
    if kind == "random_bytes":
        return data[:position] + payload + data[position:]
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n")
    if kind in ("lone_cr", "nul"):
        return data[:position] + (b"\r" if kind == "lone_cr" else b"\x00") + data[position:]
    if kind == "huge_line":
        lines[index] = lines[index] + b"x" * HUGE
        return b"\n".join(lines)
    if kind == "truncate":
        return data[:position]
    if kind == "empty":
        return b""
    if kind == "delete_line":
        del lines[index]
        return b"\n".join(lines)
    if kind == "duplicate_line":
        lines.insert(index, lines[index])
        return b"\n".join(lines)
    if kind == "blank_line":
        lines.insert(index, b"")
        return b"\n".join(lines)
    raise ValueError(kind)


mutation = st.tuples(
    st.sampled_from(MUTATIONS), st.integers(0, 10_000), st.integers(0, 50), st.binary(min_size=1, max_size=6)
)


# ----------------------------------------------------------------------------------------------- checks


def _line_count(data: bytes) -> int:
    return data.count(b"\n") + 1


def check_result(examples, files: dict[Path, bytes]) -> None:
    """Examples with non-empty string texts whose source is ``file:line`` of an existing line."""
    assert isinstance(examples, list)
    names = {str(path): _line_count(data) for path, data in files.items()}
    for example in examples:
        assert isinstance(example, Example)
        assert example.texts and all(isinstance(text, str) and text.strip() for text in example.texts)
        path, _, line = example.source.rpartition(":")
        assert path in names, example.source
        assert 1 <= int(line) <= names[path], example.source


def check_error(error: ContrastextError, files: dict[Path, bytes]) -> None:
    """The message names one of the files; a DataFormatError's line exists in that file."""
    message = str(error)
    named = [path for path in files if str(path) in message]
    assert named, f"no file named in: {message}"
    assert "\n" not in message, message
    if isinstance(error, DataFormatError) and error.line is not None:
        assert error.path in {str(path) for path in files}, message
        assert message.startswith(f"{error.path}:{error.line}: "), message
        assert 1 <= error.line <= _line_count(files[Path(error.path)]), message


def read_mutated(reader: Reader, seed: dict[str, bytes], target: int, mutations) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        names = sorted(seed)
        files = {}
        for position, name in enumerate(names):
            data = seed[name]
            if position == target % len(names):
                for kind, a, b, payload in mutations:
                    data = mutate(data, kind, a, b, payload)
            (folder / name).write_bytes(data)
            files[folder / name] = data
        try:
            first = reader.call(folder)
        except ContrastextError as error:
            check_error(error, files)
            return
        check_result(first, files)
        assert list(reader.call(folder)) == list(first)  # reading is deterministic


@pytest.mark.parametrize("reader", READERS, ids=[reader.name for reader in READERS])
def test_reader_on_mutated_real_rows(reader: Reader, seeds):
    seed = seeds[reader.name]

    @settings(
        max_examples=EXAMPLES_PER_READER,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(target=st.integers(0, 5), mutations=st.lists(mutation, min_size=1, max_size=3))
    def property_holds(target, mutations):
        read_mutated(reader, seed, target, mutations)

    property_holds()


@pytest.mark.parametrize("reader", READERS, ids=[reader.name for reader in READERS])
def test_reader_on_the_unmutated_rows(reader: Reader, seeds):
    """The seeds themselves read (so the mutations above start from valid files)."""
    read_mutated(reader, seeds[reader.name], 0, [])


@pytest.mark.parametrize("kind", MUTATIONS)
def test_every_mutation_on_every_reader(kind, seeds):
    """Each mutation once on each reader's first file, at a fixed position (a deterministic floor)."""
    for reader in READERS:
        read_mutated(reader, seeds[reader.name], 0, [(kind, 2, 1, b"\xff\x00")])
