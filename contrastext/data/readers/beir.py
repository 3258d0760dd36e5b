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

Other column names: ``BeirColumns`` (``read_beir(folder, split, BeirColumns(id="doc_id", text="body"))``) names
the id, text and title columns of the corpus and queries files and the three columns of the qrels file; the
evaluation spec ``ir[id=doc_id,text=body]:FOLDER`` gives them (:mod:`contrastext.evaluation.task_specs`).

Bad input is a ``DataFormatError`` naming ``file:line``: a row without ``_id`` or ``text``, a text that is not a
string, an id given twice, a qrels row naming a query or a document the files lack, a score that is not an
integer, a qrels file without its header (a qrels file is not an STS file: ``looks_like_qrels``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from contrastext.data.readers.lines import (
    PathLike,
    iter_csv_rows,
    iter_json_objects,
    require_file,
    require_folder,
)
from contrastext.errors import DataFormatError, EmptyDataError, MissingDataError

SUFFIXES: tuple[str, ...] = (".jsonl", ".tsv", ".csv")


@dataclass(frozen=True)
class BeirColumns:
    """The column (JSONL: key) names read: ``id``, ``text``, ``title`` of the corpus and queries files (queries
    have no title), ``query_id``, ``corpus_id``, ``score`` of the qrels header. The defaults are BEIR's; a qrels
    header is matched without regard to case, ``_`` and ``-`` alike."""

    id: str = "_id"
    text: str = "text"
    title: str = "title"
    query_id: str = "query-id"
    corpus_id: str = "corpus-id"
    score: str = "score"

    @property
    def qrels(self) -> tuple[str, str, str]:
        return self.query_id, self.corpus_id, self.score

    @property
    def is_default(self) -> bool:
        return self == BeirColumns()


DEFAULT_COLUMNS = BeirColumns()
ROLES: tuple[str, ...] = ("id", "text", "title", "query_id", "corpus_id", "score")
"""The fields of :class:`BeirColumns`: the roles an ``ir[...]`` spec may name."""


@dataclass
class BeirData:
    """``queries`` and ``corpus`` map ids to texts (file order); ``relevant_docs`` maps a query id to the ids
    of its relevant documents (score > 0); ``qrels`` every judgement ``{query: {doc: score}}``."""

    queries: dict[str, str]
    corpus: dict[str, str]
    relevant_docs: dict[str, set[str]]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    paths: tuple[Path, Path, Path] | None = None

    def judged_queries(self) -> list[str]:
        """The ids of the queries with at least one relevant document, in file order (the ones scored)."""
        return [qid for qid in self.queries if self.relevant_docs.get(qid)]

    def first_queries(self, limit: int | None) -> BeirData:
        """This set with only its first ``limit`` judged queries (None: all of them); the corpus stays whole."""
        if limit is None:
            return self
        kept = self.judged_queries()[:limit]
        return BeirData({qid: self.queries[qid] for qid in kept}, self.corpus,
                        {qid: self.relevant_docs[qid] for qid in kept}, {qid: self.qrels[qid] for qid in kept},
                        self.paths)  # fmt: skip


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


def looks_like_beir_folder(folder: PathLike) -> bool:
    """True for a folder holding a ``qrels/`` folder and a corpus file (``corpus.jsonl`` / ``.tsv`` / ``.csv``)."""
    folder = Path(folder)
    return (folder / "qrels").is_dir() and any((folder / f"corpus{suffix}").is_file() for suffix in SUFFIXES)


def read_beir(folder: PathLike, split: str = "test", columns: BeirColumns = DEFAULT_COLUMNS) -> BeirData:
    """Read a BEIR folder: ``corpus``, ``queries`` and ``qrels/<split>`` (see the module docstring)."""
    folder = require_folder(folder)
    qrels_folder = folder / "qrels"
    if not qrels_folder.is_dir():
        raise MissingDataError(f"retrieval data folder {folder} has no qrels/ folder (qrels/{split}.tsv)")
    return read_beir_files(
        find_file(folder, "corpus"), find_file(folder, "queries"), find_file(qrels_folder, split), columns
    )


def read_beir_files(
    corpus: PathLike, queries: PathLike, qrels: PathLike, columns: BeirColumns = DEFAULT_COLUMNS
) -> BeirData:
    """Read the three files of a retrieval set; every qrels id must name a query and a document read."""
    corpus_texts = read_id_texts(corpus, with_title=True, columns=columns)
    query_texts = read_id_texts(queries, with_title=False, columns=columns)
    judgements = read_qrels(qrels, query_texts, corpus_texts, columns)
    relevant = {qid: {doc for doc, score in docs.items() if score > 0} for qid, docs in judgements.items()}
    return BeirData(query_texts, corpus_texts, {q: docs for q, docs in relevant.items() if docs}, judgements,
                    (Path(corpus), Path(queries), Path(qrels)))


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line, {column: value})`` of a JSONL, CSV or TSV file (by suffix)."""
    if path.suffix == ".jsonl":
        yield from iter_json_objects(path)
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


def read_id_texts(path: PathLike, with_title: bool, columns: BeirColumns = DEFAULT_COLUMNS) -> dict[str, str]:
    """``{_id: text}`` of a corpus (``with_title``: title + " " + text) or a queries file, in file order."""
    path = require_file(path)
    texts: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for line, record in _records(path):
        identifier = _identifier(path, line, record, columns.id)
        text = _text(path, line, record, columns.text, required=True)
        if with_title:
            title = _text(path, line, record, columns.title, required=False)
            text = f"{title} {text}".strip() if title.strip() else text
        if identifier in texts:
            raise DataFormatError(
                path, line, f"duplicate {columns.id} {identifier!r} (first at line {first_line[identifier]})"
            )
        texts[identifier] = text
        first_line[identifier] = line
    if not texts:
        raise EmptyDataError(f"{path}: no rows")
    return texts


def _header_name(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def qrels_positions(header: list[str], columns: BeirColumns = DEFAULT_COLUMNS) -> tuple[int, int, int] | None:
    """The positions of the query-id, corpus-id and score columns in a qrels header (None: not all there).

    BEIR's own header (:func:`looks_like_qrels`) takes its score from the third column, whatever its name."""
    names = [_header_name(name) for name in header]
    if columns.is_default and looks_like_qrels(header) and len(header) == 3:
        return 0, 1, 2
    wanted = [_header_name(name) for name in columns.qrels]
    if not all(name in names for name in wanted):
        return None
    query, corpus, score = (names.index(name) for name in wanted)
    return query, corpus, score


def read_qrels(
    path: PathLike, queries: dict[str, str], corpus: dict[str, str], columns: BeirColumns = DEFAULT_COLUMNS
) -> dict[str, dict[str, int]]:
    """``{query-id: {corpus-id: score}}`` of a qrels file (TSV or CSV with the header query-id, corpus-id, score)."""
    path = require_file(path)
    delimiter = "," if path.suffix == ".csv" else "\t"
    judgements: dict[str, dict[str, int]] = {}
    header: list[str] | None = None
    positions = (0, 1, 2)
    for line, fields in iter_csv_rows(path, delimiter=delimiter):
        if not any(value.strip() for value in fields):
            continue
        if header is None:
            found = qrels_positions(fields, columns)
            if found is None:
                names = ", ".join(columns.qrels)
                raise DataFormatError(path, line, f"expected the qrels header {names} as the first row")
            header, positions = [name.strip() for name in fields], found
            continue
        if len(fields) != len(header):
            raise DataFormatError(path, line, f"expected {len(header)} columns ({', '.join(header)}), found {len(fields)}")
        query_id, corpus_id, raw_score = (fields[position].strip() for position in positions)
        if query_id not in queries:
            raise DataFormatError(path, line, f"unknown {header[positions[0]]} {query_id!r}: not in the queries file")
        if corpus_id not in corpus:
            raise DataFormatError(path, line, f"unknown {header[positions[1]]} {corpus_id!r}: not in the corpus file")
        try:
            score = int(raw_score)
        except ValueError:
            raise DataFormatError(path, line, f"score {raw_score!r} is not an integer") from None
        docs = judgements.setdefault(query_id, {})
        if corpus_id in docs:
            raise DataFormatError(path, line, f"query {query_id!r} judges {header[positions[1]]} {corpus_id!r} twice")
        docs[corpus_id] = score
    if not judgements:
        raise EmptyDataError(f"{path}: no judgements after the header")
    return judgements
