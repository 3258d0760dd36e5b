"""Retrieval data in the BEIR layout: queries, a corpus and relevance judgements (qrels).

A folder (``read_beir(folder, split)``)::

    corpus.jsonl         {"_id": "d1", "title": "optional", "text": "..."}   one object a line
    queries.jsonl        {"_id": "q1", "text": "..."}
    qrels/<split>.tsv    query-id<TAB>corpus-id<TAB>score, after a header row   (split: test by default)

or the same three as CSV / TSV files with a header row: ``corpus.csv`` / ``corpus.tsv`` (columns ``_id``,
``text``, optional ``title``), ``queries.csv`` / ``queries.tsv`` (``_id``, ``text``) and ``qrels/<split>.csv``
(or ``.tsv``); each name is looked for as ``.jsonl``, then ``.tsv``, then ``.csv``. Three files anywhere:
``read_beir_files(corpus, queries, qrels)``.

What is read:

- a document's text is ``title + " " + text`` (stripped) when it has a non-empty title, else its text, as
  sentence-transformers' and BEIR's retrieval examples build it; ids are strings (JSON integers become their digits);
- a qrels row with a score > 0 makes the document relevant to the query; rows scored 0 (or less) are judged
  not relevant (BEIR's evaluation, pytrec_eval at relevance level 1). ``BeirData.relevant_docs`` holds the relevant
  sets (what ST's ``InformationRetrievalEvaluator`` takes), ``BeirData.qrels`` every judgement with its grade.

Bad input is a ``DataFormatError`` naming ``file:line``: a row without ``_id`` or ``text``, a text that is not a
string, an id given twice, a qrels row naming a query or a document the files lack, a score that is not an
integer, a qrels file without its header (a qrels file is not an STS file: ``looks_like_qrels``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from contrastext.data.readers.lines import PathLike, iter_csv_rows, iter_lines, require_file, require_folder
from contrastext.errors import DataFormatError, EmptyDataError, MissingDataError

SUFFIXES: tuple[str, ...] = (".jsonl", ".tsv", ".csv")
QRELS_COLUMNS: tuple[str, ...] = ("query-id", "corpus-id", "score")


@dataclass
class BeirData:
    """``queries`` and ``corpus`` map ids to texts (file order); ``relevant_docs`` maps a query id to the ids
    of its relevant documents (score > 0); ``qrels`` every judgement ``{query: {doc: score}}``."""

    queries: dict[str, str]
    corpus: dict[str, str]
    relevant_docs: dict[str, set[str]]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    paths: tuple[Path, Path, Path] | None = None


def looks_like_qrels(header: list[str]) -> bool:
    """True when a header row names BEIR's qrels columns (query-id, corpus-id, score; ``_`` for ``-`` accepted)."""
    names = [name.strip().lower().replace("_", "-") for name in header]
    return names[:2] == ["query-id", "corpus-id"]


def find_file(folder: Path, stem: str) -> Path:
    """``folder/stem`` with the first suffix of ``SUFFIXES`` that exists; MissingDataError listing the tries."""
    for suffix in SUFFIXES:
        candidate = folder / f"{stem}{suffix}"
        if candidate.is_file():
            return candidate
    tried = ", ".join(f"{stem}{suffix}" for suffix in SUFFIXES)
    raise MissingDataError(f"retrieval data folder {folder} has none of {tried}")


def read_beir(folder: PathLike, split: str = "test") -> BeirData:
    """Read a BEIR folder: ``corpus``, ``queries`` and ``qrels/<split>`` (see the module docstring)."""
    folder = require_folder(folder)
    qrels_folder = folder / "qrels"
    if not qrels_folder.is_dir():
        raise MissingDataError(f"retrieval data folder {folder} has no qrels/ folder (qrels/{split}.tsv)")
    return read_beir_files(find_file(folder, "corpus"), find_file(folder, "queries"), find_file(qrels_folder, split))


def read_beir_files(corpus: PathLike, queries: PathLike, qrels: PathLike) -> BeirData:
    """Read the three files of a retrieval set; every qrels id must name a query and a document read."""
    corpus_texts = read_id_texts(corpus, with_title=True)
    query_texts = read_id_texts(queries, with_title=False)
    judgements = read_qrels(qrels, query_texts, corpus_texts)
    relevant = {qid: {doc for doc, score in docs.items() if score > 0} for qid, docs in judgements.items()}
    return BeirData(query_texts, corpus_texts, {q: docs for q, docs in relevant.items() if docs}, judgements,
                    (Path(corpus), Path(queries), Path(qrels)))


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line, {column: value})`` of a JSONL, CSV or TSV file (by suffix)."""
    if path.suffix == ".jsonl":
        for line, text in iter_lines(path):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as error:
                raise DataFormatError(path, line, f"invalid JSON: {error.msg} at column {error.colno}") from None
            if not isinstance(record, dict):
                raise DataFormatError(path, line, f"expected a JSON object, found {type(record).__name__}")
            yield line, record
        return
    rows = iter_csv_rows(path, delimiter="\t" if path.suffix == ".tsv" else ",")
    header: list[str] | None = None
    for line, fields in rows:
        if header is None:
            header = [name.strip() for name in fields]
            continue
        if not any(value.strip() for value in fields):
            continue
        if len(fields) != len(header):
            raise DataFormatError(path, line, f"expected {len(header)} columns ({', '.join(header)}), found {len(fields)}")
        yield line, dict(zip(header, fields, strict=True))


def _identifier(path: Path, line: int, record: dict, key: str) -> str:
    value = record.get(key)
    if value is None:
        raise DataFormatError(path, line, f"no {key!r}: every row needs an id")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise DataFormatError(path, line, f"{key!r} is {value!r}: an id is a string")
    text = str(value).strip()
    if not text:
        raise DataFormatError(path, line, f"empty {key!r}: every row needs an id")
    return text


def _text(path: Path, line: int, record: dict, key: str, required: bool) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if value is None:
        raise DataFormatError(path, line, f"no {key!r}: every row needs one")
    if not isinstance(value, str):
        raise DataFormatError(path, line, f"{key!r} is {value!r}: expected a string")
    return value


def read_id_texts(path: PathLike, with_title: bool) -> dict[str, str]:
    """``{_id: text}`` of a corpus (``with_title``: title + " " + text) or a queries file, in file order."""
    path = require_file(path)
    texts: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for line, record in _records(path):
        identifier = _identifier(path, line, record, "_id")
        text = _text(path, line, record, "text", required=True)
        if with_title:
            title = _text(path, line, record, "title", required=False)
            text = f"{title} {text}".strip() if title.strip() else text
        if identifier in texts:
            raise DataFormatError(path, line, f"duplicate _id {identifier!r} (first at line {first_line[identifier]})")
        texts[identifier] = text
        first_line[identifier] = line
    if not texts:
        raise EmptyDataError(f"{path}: no rows")
    return texts


def read_qrels(path: PathLike, queries: dict[str, str], corpus: dict[str, str]) -> dict[str, dict[str, int]]:
    """``{query-id: {corpus-id: score}}`` of a qrels file (TSV or CSV with the header query-id, corpus-id, score)."""
    path = require_file(path)
    delimiter = "," if path.suffix == ".csv" else "\t"
    judgements: dict[str, dict[str, int]] = {}
    header_seen = False
    for line, fields in iter_csv_rows(path, delimiter=delimiter):
        if not any(value.strip() for value in fields):
            continue
        if not header_seen:
            if not looks_like_qrels(fields):
                raise DataFormatError(path, line, "expected the qrels header query-id, corpus-id, score as the first row")
            header_seen = True
            continue
        if len(fields) != 3:
            raise DataFormatError(path, line, f"expected 3 columns ({', '.join(QRELS_COLUMNS)}), found {len(fields)}")
        query_id, corpus_id, raw_score = (value.strip() for value in fields)
        if query_id not in queries:
            raise DataFormatError(path, line, f"unknown query-id {query_id!r}: not in the queries file")
        if corpus_id not in corpus:
            raise DataFormatError(path, line, f"unknown corpus-id {corpus_id!r}: not in the corpus file")
        try:
            score = int(raw_score)
        except ValueError:
            raise DataFormatError(path, line, f"score {raw_score!r} is not an integer") from None
        docs = judgements.setdefault(query_id, {})
        if corpus_id in docs:
            raise DataFormatError(path, line, f"query {query_id!r} judges corpus-id {corpus_id!r} twice")
        docs[corpus_id] = score
    if not judgements:
        raise EmptyDataError(f"{path}: no judgements after the header")
    return judgements
