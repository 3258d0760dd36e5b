"""Streaming conversion of a pair file (CSV / TSV / JSONL) or a local ``datasets`` split to a column store.

A training file of 100M rows does not fit in memory as Python :class:`~contrastext.data.examples.Example`
objects (~0.7 GB per million pairs). :func:`column_examples` converts it once, a block of rows at a time (bounded
memory: a CSV / TSV file :data:`~contrastext.data.readers.csv_blocks.BLOCK_BYTES` at a time, by Arrow's string
kernels where no line is quoted, :mod:`contrastext.data.readers.csv_blocks`; a ``datasets`` split
:data:`CHUNK_ROWS` rows at a time from its Arrow table, :func:`dataset_blocks`; JSONL rows :data:`CHUNK_ROWS` at a
time in Python), into a folder that :class:`~contrastext.data.column_store.ColumnExamples` memory-maps:

- ``texts.arrow``: an Arrow IPC file, one string column a text column (``text_0`` …) and ``line``
  (the row's line in the file, for ``path:line`` sources);
- ``lengths.int32``: each row's length, the sum of its texts' lengths in characters (``len(text)``, what
  ``train.group_by_length`` sorts on in memory), raw little-endian int32;
- ``hashes.uint64``: each text's 64-bit xxh3 hash, row after row (n × columns), what the no-duplicates sampler
  compares instead of the strings (two different texts with one hash, p ≈ n²/2⁶⁵, would be kept apart too);
- ``meta.json``: the file it came from, its columns, the rows kept and the rows dropped as blank.

The rows are those the in-memory path reads (the same rules, texts stripped, an empty text, a missing column or a
bad line a DataFormatError naming ``path:line``), and rows holding a text that is blank once tokenised
(:func:`~contrastext.data.quality.is_blank`) are dropped during the conversion, counted in ``meta.json`` with the
first one's source.

The folder lives in a cache directory (``cache_dir``, else ``$CONTRASTEXT_CACHE/columns``, else
``~/.cache/contrastext/columns``), never beside the input, named by a key of the input's fingerprint
(:mod:`contrastext.runtime.fingerprint`: size, modification time and hashes), its resolved path and the columns
read: a second run on the same file opens the store at once; a changed file is converted again. The folder is
written under a temporary name and renamed when complete, so an interrupted conversion leaves no store behind.

Example::

    >>> store = column_examples("pairs.csv", ["anchor", "positive"])   # converts once, then memory-maps
    >>> len(store), store[0].texts, store.lengths[:3]
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from contrastext.data.column_store import HASHES, LENGTHS, META, TEXTS, ColumnExamples, text_field
from contrastext.data.quality import REMOVED_CATEGORIES, is_blank
from contrastext.data.readers.csv_blocks import PYTHON_WHITESPACE, TextBlock, csv_blocks
from contrastext.data.readers.lines import PathLike, require_file, require_text, source
from contrastext.data.readers.table import FORMAT_BY_SUFFIX, _as_text, json_records
from contrastext.errors import DataFormatError, EmptyDataError
from contrastext.runtime.fingerprint import fingerprint

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
"""Bumped when the store's layout changes: older stores are converted again."""

CHUNK_ROWS = 65_536
"""Rows converted at a time from JSONL (in Python) or a ``datasets`` split (from its Arrow table)."""

CACHE_ENV = "CONTRASTEXT_CACHE"

Row = tuple[int, tuple[str, ...]]
T = TypeVar("T")


def default_cache_dir() -> Path:
    """``$CONTRASTEXT_CACHE/columns``, else ``$XDG_CACHE_HOME/contrastext/columns`` (``~/.cache`` by default)."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given).expanduser() / "columns"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "contrastext" / "columns"


def store_key(path: PathLike, text_columns: Sequence[str], split: str | None = None) -> str:
    """The cache folder's name: a hash of the input's fingerprint, resolved path, split and the columns read."""
    record = {
        "version": FORMAT_VERSION,
        "path": str(Path(path).expanduser().resolve()),
        "given": str(path),  # the sources name the file as given
        "split": split,
        "columns": list(text_columns),
        "fingerprint": fingerprint(Path(path).expanduser()),
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:32]


def file_blocks(path: PathLike, text_columns: Sequence[str]) -> Iterator[TextBlock]:
    """The rows of a CSV / TSV / JSONL file in blocks, read and checked as :func:`~contrastext.data.readers.table.
    read_table` reads it (header, column count, texts stripped, an empty text an error naming ``path:line``): CSV and
    TSV by :func:`~contrastext.data.readers.csv_blocks.csv_blocks` (Arrow's kernels where no line is quoted),
    JSONL row by row."""
    file = require_file(path)
    file_format = FORMAT_BY_SUFFIX.get(file.suffix.lower())
    if file_format is None:
        raise ValueError(f"cannot tell the format of {file} from its suffix; use .csv, .tsv or .jsonl")
    if file_format == "jsonl":
        return row_blocks(record_rows(file, json_records(file), text_columns), len(text_columns))
    return csv_blocks(file, text_columns, delimiter="," if file_format == "csv" else "\t")


def row_blocks(rows: Iterable[Row], width: int) -> Iterator[TextBlock]:
    """``rows`` in blocks of :data:`CHUNK_ROWS`."""
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == CHUNK_ROWS:
            yield TextBlock.from_rows(chunk, width)
            chunk = []
    if chunk:
        yield TextBlock.from_rows(chunk, width)


def record_rows(where: PathLike, records: Iterable[tuple[int, dict]], text_columns: Sequence[str]) -> Iterator[Row]:
    """``(line, texts)`` of JSON objects or dataset rows, checked as :func:`~contrastext.data.readers.table.
    read_records` checks them (a missing key, a value that is not text, an empty text: ``where:line``)."""
    for line, record in records:
        texts = []
        for column in text_columns:
            if column not in record:
                raise DataFormatError(where, line, f"missing key {column!r}; keys are {', '.join(record)}")
            texts.append(require_text(where, line, _as_text(where, line, record[column], column), column))
        yield line, tuple(texts)


def column_examples(
    path: PathLike,
    text_columns: Sequence[str],
    cache_dir: PathLike | None = None,
    progress: bool | None = None,
) -> ColumnExamples:
    """The column store of ``path``'s ``text_columns`` (a CSV / TSV / JSONL file): converted on the first call,
    opened from the cache afterwards. ``progress``: a progress bar (None: when stderr is a terminal)."""
    file = require_file(Path(path).expanduser())
    folder = Path(cache_dir or default_cache_dir()).expanduser() / store_key(file, text_columns)
    if not (folder / META).is_file():
        convert(file_blocks(file, text_columns), folder, str(file), list(text_columns), progress)
    return ColumnExamples(folder)


def dataset_column_examples(
    dataset: PathLike,
    split: str | None,
    text_columns: Sequence[str],
    cache_dir: PathLike | None = None,
    progress: bool | None = None,
) -> ColumnExamples:
    """:func:`column_examples` for one split of a local ``datasets`` folder (``save_to_disk`` or data files),
    its rows streamed from ``datasets``' memory-mapped table; errors name ``<dataset>[<split>]:<row>``."""
    from contrastext.data.readers.hf_datasets import open_dataset_split

    folder = Path(cache_dir or default_cache_dir()).expanduser() / store_key(dataset, text_columns, split or "")
    if not (folder / META).is_file():
        opened = open_dataset_split(str(dataset), split)
        convert(dataset_blocks(opened, text_columns), folder, opened.where, list(text_columns), progress)
    return ColumnExamples(folder)


def dataset_blocks(opened, text_columns: Sequence[str]) -> Iterator[TextBlock]:
    """The rows of a ``datasets`` split (:class:`~contrastext.data.readers.hf_datasets.DatasetSplit`),
    :data:`CHUNK_ROWS` at a time, as :func:`record_rows` reads them. A block whose text columns are all string
    columns with no null and no text empty once stripped is taken from the split's Arrow table by Arrow's kernels
    (stripped as ``str.strip()`` strips); any other block (a missing column, a number, a class label, a null, an
    empty text) goes through :func:`record_rows`, row by row, for its values or its error
    (``<dataset>[<split>]:<row>``)."""
    first = 1
    for table in opened.dataset.with_format("arrow").iter(batch_size=CHUNK_ROWS):
        block = _string_block(table, text_columns, first)
        if block is None:
            rows = record_rows(opened.where, opened.numbered(table.to_pylist(), first), text_columns)
            block = TextBlock.from_rows(list(rows), len(text_columns))
        yield block
        first += table.num_rows


def _string_block(table, text_columns: Sequence[str], first: int) -> TextBlock | None:
    """The texts of ``table``'s ``text_columns`` stripped, when every one is a string column with no null and no
    empty text; else None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = []
    for name in text_columns:
        if name not in table.column_names:
            return None
        column = table.column(name)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)) or column.null_count:
            return None
        text = pc.utf8_trim(column.combine_chunks(), characters=PYTHON_WHITESPACE)
        if not pc.all(pc.greater(pc.binary_length(text), 0)).as_py():
            return None
        texts.append(text)
    return TextBlock(texts, np.arange(first, first + table.num_rows, dtype=np.int64))


def convert(
    blocks: Iterable[TextBlock], folder: Path, where: str, columns: list[str], progress: bool | None = None
) -> None:
    """Write the rows of ``blocks`` as a column store into ``folder`` (see the module docstring), a block at a time.

    Rows with a blank text are dropped and counted; no row left is an EmptyDataError naming ``where``."""
    import pyarrow as pa
    from tqdm import tqdm

    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = folder.parent / f"{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    schema = pa.schema([*(pa.field(text_field(i), pa.string()) for i in range(len(columns))),
                        pa.field("line", pa.int64())])  # fmt: skip
    kept = dropped = 0
    first_dropped: str | None = None
    started = time.perf_counter()
    bar = tqdm(desc=f"data: converting {Path(where).name} to columns", unit=" rows", unit_scale=True,
               disable=None if progress is None else not progress)  # fmt: skip
    try:
        with (pa.OSFile(str(partial / TEXTS), "wb") as sink, pa.ipc.new_file(sink, schema) as writer,
              open(partial / LENGTHS, "wb") as lengths, open(partial / HASHES, "wb") as hashes):  # fmt: skip
            for block in read_ahead(blocks):
                blank = blank_rows(block)
                if blank.any():
                    dropped += int(blank.sum())
                    first_dropped = first_dropped or source(where, int(block.lines[np.argmax(blank)]))
                    block = block.filter(~blank)
                if len(block):
                    _write_block(block, schema, writer, lengths, hashes)
                    kept += len(block)
                    bar.update(len(block))
        if not kept:
            what = f"every row holds a blank text (the first at {first_dropped})" if dropped else (
                "the file is empty or holds a header only")
            raise EmptyDataError(f"{where}: no example: {what}")
        meta = {"version": FORMAT_VERSION, "where": where, "columns": columns, "rows": kept,
                "dropped_blank": dropped, "first_dropped": first_dropped}  # fmt: skip
        (partial / META).write_text(json.dumps(meta, indent=1) + "\n")
        try:
            partial.rename(folder)
        except OSError:  # another process converted the same file first: its store is the same
            shutil.rmtree(partial, ignore_errors=True)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        bar.close()
    logger.info("data: %s converted to a column store in %.1f s: %d rows (%d blank dropped) in %s",
                where, time.perf_counter() - started, kept, dropped, folder)  # fmt: skip


_END = object()


def read_ahead(items: Iterable[T]) -> Iterator[T]:
    """``items``, each made in a worker thread while the caller works on the one before: a block's reading (file
    reads and Arrow's kernels, which release the GIL) overlaps the previous block's hashing and writing."""
    from concurrent.futures import ThreadPoolExecutor

    iterator = iter(items)
    with ThreadPoolExecutor(1, thread_name_prefix="contrastext-read-ahead") as pool:
        coming = pool.submit(next, iterator, _END)
        while (item := coming.result()) is not _END:
            coming = pool.submit(next, iterator, _END)
            yield item


REMOVED_ASCII = np.array([unicodedata.category(chr(code)) in REMOVED_CATEGORIES for code in range(128)])
"""Whether each ASCII character is removed before tokenising (:func:`~contrastext.data.quality.is_blank`)."""


def blank_rows(block: TextBlock) -> np.ndarray:
    """Whether each row holds a text that is blank once tokenised (:func:`~contrastext.data.quality.is_blank`).

    A stripped text whose first character is ASCII and kept is not blank (``is_blank``'s own first test, on the
    first byte of every text at once); ``is_blank`` decides the others, one by one."""
    blank = np.zeros(len(block), dtype=bool)
    for text in block.texts:
        first = _first_bytes(text)
        unsure = np.flatnonzero((first >= 0x80) | REMOVED_ASCII[first & 0x7F])
        if unsure.size:
            blank[unsure] |= [is_blank(value) for value in text.take(unsure).to_pylist()]
    return blank


def _first_bytes(text) -> np.ndarray:
    """The first UTF-8 byte of every string of an Arrow string array with no empty string."""
    import pyarrow as pa

    offset_type = np.int64 if pa.types.is_large_string(text.type) else np.int32
    _, offsets, data = text.buffers()
    starts = np.frombuffer(offsets, dtype=offset_type)[text.offset : text.offset + len(text)]
    return np.frombuffer(data, dtype=np.uint8)[starts]


def _write_block(block: TextBlock, schema, writer, lengths, hashes) -> None:
    """One record batch of the texts and lines; each row's length in characters; each text's xxh3 hash, row
    after row."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import xxhash

    texts = [text.cast(pa.string()) for text in block.texts]
    writer.write_batch(pa.record_batch([*texts, pa.array(block.lines, type=pa.int64())], schema=schema))
    row_lengths = np.zeros(len(block), dtype=np.int64)
    for text in texts:
        row_lengths += pc.utf8_length(text).to_numpy(zero_copy_only=False)
    lengths.write(row_lengths.astype("<i4").tobytes())
    digest = xxhash.xxh3_64_intdigest
    per_text = [np.fromiter(map(digest, text.cast(pa.binary()).to_pylist()), dtype=np.uint64, count=len(block))
                for text in texts]  # fmt: skip
    hashes.write(np.stack(per_text, axis=1).astype("<u8").tobytes())


__all__ = ["CHUNK_ROWS", "column_examples", "convert", "dataset_blocks", "dataset_column_examples", "default_cache_dir",
           "file_blocks", "read_ahead", "record_rows", "row_blocks", "store_key"]
