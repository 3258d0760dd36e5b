"""Evaluation specs: the registry's tasks and the user's own files, in one syntax for ``contrastext eval --tasks``
and a recipe's ``eval.tasks``.

Syntax (several specs are separated by commas on the command line, list items in a recipe)::

    NAME[:SPLIT]                   a registry task: stsb:dev, sts12, sickr:dev, sst2
    KIND:PATH[@SPLIT]              a file of yours, KIND one of sts, classification, pairs: sts:my_sts.csv
    ir:FOLDER[@SPLIT]              a retrieval set in the BEIR layout (corpus, queries, qrels/SPLIT.tsv; SPLIT
                                   test by default), scored as sentence-transformers' InformationRetrievalEvaluator
    KIND[ROLE=COLUMN,...]:PATH     the same, naming the columns: sts[text=text_a,pair=text_b,score=similarity]:my.csv
    PATH[@SPLIT]                   a file whose kind follows from its columns: my_sts.csv (a BEIR folder: ir)

Column roles (``[ROLE=COLUMN,...]`` right after the kind, the roles of training's ``data.columns``): ``text``,
``pair``, ``negative`` (the texts, in that order), ``label`` (classes) and ``score`` (numbers); which a kind takes
is in :data:`KIND_ROLES`. As in training (:func:`contrastext.data.sources.column_layout`), named text roles are the
texts; without them every column but the named ones and ``label`` / ``score`` is a text, in file order; a target
not named is the column called ``score`` (sts) or ``label`` (classification). ``ir`` takes ``id``, ``text``,
``title`` (the corpus and queries files' columns or JSON keys, default ``_id``, ``text``, ``title``) and
``query_id``, ``corpus_id``, ``score`` (the qrels header, default ``query-id``, ``corpus-id``, ``score``). A role
given twice, a role the kind does not take, or a column the file lacks is an error naming it; column names
cannot hold ``,``, ``=`` or ``]``. On the command line the commas inside ``[...]`` do not separate specs.

A file is CSV (``.csv``, header row), TSV (``.tsv``, header row) or JSON Lines (``.jsonl`` / ``.json``, one
object a line); a local Hugging Face dataset (a ``save_to_disk`` folder, a folder of data files, a ``.parquet``
file) is read through ``datasets`` (:mod:`contrastext.data.readers.hf_datasets`), ``@SPLIT`` picking its split
(default ``train``, or its only split). Its columns follow the sentence-transformers convention: the text columns in file order, then
a ``label`` or ``score`` column:

============== ============================================ =============================================
kind           columns                                      scored by
============== ============================================ =============================================
sts            text, text, ``score`` (or ``label``), float  Spearman / Pearson of the cosine (headline
                                                            Spearman), as the STS tasks
classification text[, text], ``label`` (strings or ints)    the frozen-embedding probe (logistic
                                                            regression) trained on 80 % of the file, scored
                                                            on the other 20 % (seeded): accuracy, F1, MCC
pairs          anchor, positive[, hard_negative], no label  retrieval of each anchor's positive among all
                                                            positives (:mod:`~contrastext.evaluation.retrieval`):
                                                            accuracy@1/@10, MRR@10 (headline)
ir             a folder: corpus, queries, qrels/SPLIT       each query searches the corpus
               (:mod:`contrastext.data.readers.beir`)      (:mod:`~contrastext.evaluation.information_retrieval`):
                                                            ST's keys ``cosine_ndcg@10`` (headline) ...
============== ============================================ =============================================

Without a KIND: a ``score`` column means sts, a ``label`` column classification (a ``label`` column of
non-integer numbers is refused: write ``sts:``), no label column pairs. A BEIR qrels file (header
query-id, corpus-id, score) is refused whatever the kind, naming the file and the ``ir:`` spec to write. The task
is named after the file's stem (a dataset or ir folder: its name) and the split is ``file`` unless ``@SPLIT`` names
one (a dataset: the split read; ir: the qrels file, ``test`` by default), so ``sts:data/my_sts.csv`` gives the metric keys ``my_sts_file_spearman``, ``my_sts_file_score``
(:func:`~contrastext.evaluation.evaluators.metric_key`: in training, and in ``contrastext eval``'s ``metrics``, whose
``tasks`` report has ``"my_sts": {"split": "file", ...}``). A file's headline metric (``FileTask.metric``) is
``spearman`` (sts), ``accuracy`` (classification), ``mrr_at_10`` (pairs) or ``cosine_ndcg@10`` (ir: the key
``<folder>_test_cosine_ndcg@10``).

Example::

    >>> spec = parse_eval_spec("sts:my_sts.csv")
    >>> spec.task.name, spec.split, spec.kind
    ('my_sts', 'file', 'sts')
    >>> load_eval_data(spec).examples[0]
    Example(texts=('A man plays a guitar.', 'A man plays music.'), label=4.2, source='my_sts.csv:2')
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrastext.data.examples import Example
from contrastext.data.readers import beir
from contrastext.data.readers.table import FORMAT_BY_SUFFIX, read_table, table_columns
from contrastext.data.sources import TARGET_ROLES, TEXT_ROLES, named_text_roles
from contrastext.data.task_kinds import EVAL_FILE_KINDS
from contrastext.data.tasks import Task, TaskData, load_task, parse_task_spec, task_names
from contrastext.errors import (
    ConfigError,
    DataFormatError,
    EmptyDataError,
    MissingDataError,
    UnknownNameError,
)
from contrastext.evaluation.ir_keys import HEADLINE as IR_HEADLINE

FILE_SPLIT = "file"
SCORE_COLUMNS: tuple[str, ...] = ("score", "label")
"""The columns that hold an sts file's gold score, most preferred first."""
LABEL_COLUMN = "label"
IR_SPLIT = "test"
"""The qrels split an ``ir:`` spec reads without ``@SPLIT`` (BEIR's evaluation split)."""
KIND_ROLES: dict[str, tuple[str, ...]] = {
    "sts": ("text", "pair", "score"),
    "classification": ("text", "pair", "label"),
    "pairs": TEXT_ROLES,
    "ir": beir.ROLES,
}
"""The column roles each kind takes in ``KIND[ROLE=COLUMN,...]:PATH``."""
SPEC_HELP = (
    "NAME[:SPLIT] for a registry task (stsb:dev, sts12, sst2), KIND:PATH[@SPLIT] for your own CSV/TSV/JSONL "
    "file or Hugging Face dataset folder with KIND sts, classification or pairs (sts:my_sts.csv), "
    "ir:FOLDER[@SPLIT] for a BEIR retrieval folder, KIND[ROLE=COLUMN,...]:PATH to name the columns "
    "(sts[text=a,pair=b,score=sim]:my.csv); a bare PATH takes its kind from its columns"
)
_KIND_WITH_ROLES = re.compile(r"\s*([A-Za-z]\w*)\s*\[([^\]]*)\]\s*:(.*)", re.DOTALL)
DATASET_SUFFIXES: tuple[str, ...] = (".parquet", ".arrow")
"""Files read through Hugging Face ``datasets`` (besides folders)."""
_SPLIT_NAME = re.compile(r"[A-Za-z0-9][\w.-]*")


@dataclass(frozen=True)
class FileTask:
    """A user's file as a task. Has what the evaluators read of a registry :class:`~contrastext.data.tasks.Task`
    (``name``, ``kind``, ``metric``), where ``kind`` is ``sts``, ``single`` / ``pair`` (classification of one
    text or of a pair) or ``pairs`` (retrieval)."""

    name: str
    kind: str
    metric: str
    path: Path
    eval_kind: str
    text_columns: tuple[str, ...]
    label_column: str | None
    inferred: bool = False
    num_labels: int | None = None
    label_names: tuple[str, ...] | None = None
    score_range: tuple[float, float] | None = None
    description: str = ""
    dataset_split: str | None = None
    """For a Hugging Face dataset (a folder, or a parquet / arrow file): the split read; None for a table file."""
    roles: tuple[tuple[str, str], ...] = ()
    """The spec's ``[ROLE=COLUMN,...]``, as given (an ir task reads its files with them)."""


@dataclass(frozen=True)
class EvalSpec:
    """One parsed spec: its text, the task (registry or file) and the split."""

    text: str
    task: Task | FileTask
    split: str

    @property
    def is_file(self) -> bool:
        return isinstance(self.task, FileTask)

    @property
    def kind(self) -> str:
        """``sts``, ``classification``, ``pairs`` or ``ir`` for a file; the registry kind otherwise."""
        return self.task.eval_kind if isinstance(self.task, FileTask) else self.task.kind


@dataclass
class EvalData:
    """The examples of one spec (``subsets`` for STS12–16), the file read, and a classification file's labels."""

    spec: EvalSpec
    examples: list[Example]
    subsets: dict[str, list[Example]] | None = None
    path: Path | None = None
    label_names: tuple[str, ...] | None = None
    notes: list[str] = field(default_factory=list)
    retrieval: beir.BeirData | None = None
    """An ir spec's queries, corpus and judgements (its ``examples`` are empty)."""


def parse_eval_spec(spec: str) -> EvalSpec:
    """``"stsb:dev"``, ``"sts:my.csv"``, ``"my.csv@dev"`` -> an :class:`EvalSpec` (file headers are read now).

    Raises UnknownNameError for a name that is neither a registry task nor a file, MissingDataError for a
    file that does not exist, DataFormatError / ConfigError for a file whose columns do not fit its kind.
    """
    text = spec.strip()
    if not text:
        raise ConfigError(f"empty task spec; give {SPEC_HELP}")
    with_roles = _KIND_WITH_ROLES.fullmatch(text)
    if with_roles:
        kind = with_roles.group(1).lower()
        if kind not in EVAL_FILE_KINDS:
            raise UnknownNameError(
                f"task spec {text!r}: unknown kind {with_roles.group(1)!r} before [...]; kinds: "
                f"{', '.join(EVAL_FILE_KINDS)}"
            )
        roles = parse_roles(with_roles.group(2), kind, text)
        return _file_spec(text, with_roles.group(3).strip(), kind, roles)
    head, colon, rest = text.partition(":")
    if colon and head.strip().lower() in EVAL_FILE_KINDS:
        return _file_spec(text, rest.strip(), head.strip().lower())
    if head.strip().lower() in task_names():
        task, split = parse_task_spec(text)
        return EvalSpec(text, task, split)
    if _looks_like_a_file(text):
        return _file_spec(text, text, None)
    raise UnknownNameError(
        f"unknown task {text!r}: not a registry task (known: {', '.join(task_names())}) nor a file; give {SPEC_HELP}"
    )


def parse_roles(text: str, kind: str, spec: str) -> dict[str, str]:
    """``"text=a, pair=b"`` -> ``{"text": "a", "pair": "b"}``, each role one the kind takes (:data:`KIND_ROLES`)."""
    roles: dict[str, str] = {}
    allowed = KIND_ROLES[kind]
    for item in text.split(","):
        role, equals, column = (part.strip() for part in item.partition("="))
        if not equals or not role or not column:
            raise ConfigError(
                f"task spec {spec!r}: {item.strip() or 'an empty item'!r} in [...] is not ROLE=COLUMN; "
                f"{kind} takes the roles {', '.join(allowed)}"
            )
        if role not in allowed:
            hint = " (sts reads its gold scores from score=COLUMN)" if kind == "sts" and role == "label" else ""
            raise ConfigError(
                f"task spec {spec!r}: {kind} takes no column role {role!r}; its roles: {', '.join(allowed)}{hint}"
            )
        if role in roles:
            raise ConfigError(f"task spec {spec!r}: the role {role!r} is given twice")
        roles[role] = column
    return roles


def _looks_like_a_file(text: str) -> bool:
    path_text = _split_off(text)[0]
    path = Path(path_text).expanduser()
    suffix = path.suffix.lower()
    return path.exists() or suffix in FORMAT_BY_SUFFIX or suffix in DATASET_SUFFIXES or "/" in path_text


def _split_off(text: str) -> tuple[str, str]:
    """``"a/b.csv@dev"`` -> ``("a/b.csv", "dev")``; ``"a/b.csv"`` -> ``("a/b.csv", "file")``."""
    if Path(text).expanduser().exists():
        return text, FILE_SPLIT
    head, at, tail = text.rpartition("@")
    if at and head and _SPLIT_NAME.fullmatch(tail):
        return head, tail
    return text, FILE_SPLIT


def _file_spec(text: str, path_text: str, kind: str | None, roles: dict[str, str] | None = None) -> EvalSpec:
    if not path_text:
        example = "my_beir_folder" if kind == "ir" else "my_file.csv"
        raise ConfigError(f"task spec {text!r}: give a file after {kind}:, e.g. {kind}:{example}")
    path_text, split = _split_off(path_text)
    path = Path(path_text).expanduser()
    if not path.exists():
        raise MissingDataError(f"task spec {text!r}: no such file {path}")
    if kind == "ir" or (kind is None and path.is_dir() and beir.looks_like_beir_folder(path)):
        split = IR_SPLIT if split == FILE_SPLIT else split
        return EvalSpec(text, ir_task(path, split, text, roles or {}), split)
    if path.is_dir() or path.suffix.lower() in DATASET_SUFFIXES:
        opened = _open_dataset(path, None if split == FILE_SPLIT else split, text)
        return EvalSpec(text, file_task(path, kind, text, opened.columns, opened.split, roles), opened.split)
    if path.suffix.lower() not in FORMAT_BY_SUFFIX:
        raise ConfigError(
            f"task spec {text!r}: cannot tell the format of {path} from its suffix; name it "
            f"{', '.join(sorted(FORMAT_BY_SUFFIX))}, or give a Hugging Face dataset folder "
            f"or a {' / '.join(DATASET_SUFFIXES)} file"
        )
    return EvalSpec(text, file_task(path, kind, text, roles=roles), split)


def ir_task(folder: Path, split: str, spec: str, roles: dict[str, str]) -> FileTask:
    """The :class:`FileTask` of an ``ir:`` folder: its three files found and their headers checked (the rows are
    read by :func:`load_eval_data`)."""
    where = f"task spec {spec!r}"
    if not folder.is_dir():
        qrels_folder = folder.parent
        hint = (
            f"; for this qrels file write ir:{qrels_folder.parent}@{folder.stem}"
            if qrels_folder.name == "qrels" else ""
        )
        raise ConfigError(
            f"{where}: ir: takes the folder holding corpus, queries and qrels/<split>.tsv (BEIR's layout), "
            f"not the file {folder}{hint}"
        )
    columns = beir.BeirColumns(**roles)
    if not (folder / "qrels").is_dir():
        raise MissingDataError(f"{where}: {folder} has no qrels/ folder (expected qrels/{split}.tsv)")
    try:
        corpus, queries = beir.find_file(folder, "corpus"), beir.find_file(folder, "queries")
        qrels = beir.find_file(folder / "qrels", split)
    except MissingDataError as error:
        raise MissingDataError(f"{where}: {error}") from None
    for path in (corpus, queries):
        names = table_columns(path).names
        missing = [name for name in (columns.id, columns.text) if name not in names]
        if missing:
            role = "id" if missing[0] == columns.id else "text"
            raise ConfigError(
                f"{where}: no column {missing[0]!r} in {path} (its columns: {', '.join(names)}); name it with "
                f"ir[{role}=COLUMN]:{folder}"
            )
    header = table_columns(qrels).names
    if beir.qrels_positions(header, columns) is None:
        raise ConfigError(
            f"{where}: {qrels} has the header {', '.join(header)}, not {', '.join(columns.qrels)}; name its "
            f"columns with ir[query_id=COLUMN,corpus_id=COLUMN,score=COLUMN]:{folder}"
        )
    return FileTask(folder.name, "ir", IR_HEADLINE, folder, "ir", (), None, roles=tuple(roles.items()))


def _open_dataset(path: Path, split: str | None, spec: str):
    """One split of a local Hugging Face dataset (``save_to_disk`` folder, folder of data files, parquet)."""
    from contrastext.data.readers.hf_datasets import open_dataset_split

    try:
        return open_dataset_split(str(path), split, key=f"task spec {spec!r}")
    except ConfigError as error:
        message = str(error).replace("name one with data.split", "name one as PATH@SPLIT")
        raise ConfigError(message) from None


def file_task(
    path: Path,
    kind: str | None,
    spec: str | None = None,
    columns=None,
    dataset_split: str | None = None,
    roles: dict[str, str] | None = None,
) -> FileTask:
    """The :class:`FileTask` of ``path``: its columns checked against ``kind`` (inferred when None).

    ``columns`` (a ``TableColumns``) and ``dataset_split`` are given for a Hugging Face dataset; ``roles`` are the
    spec's ``[ROLE=COLUMN,...]`` (the kind is then given)."""
    where = f"task spec {spec!r}: {path}" if spec else str(path)
    if dataset_split is not None:
        where += f"[{dataset_split}]"
    columns = columns if columns is not None else table_columns(path)
    _refuse_qrels(path, columns.names, kind, dataset_split)
    roles = roles or {}
    for role, column in roles.items():
        if column not in columns.names:
            raise ConfigError(
                f"{where}: [{role}={column}]: no column {column!r}; its columns: {', '.join(columns.names)}"
            )
    by_lower = {name.lower(): name for name in columns.names}
    label_like = {by_lower[name] for name in SCORE_COLUMNS if name in by_lower}
    label_like |= {roles[role] for role in TARGET_ROLES if role in roles}
    texts = _texts_of(columns.texts, roles, label_like, where)
    score = roles.get("score") or next((by_lower[column] for column in SCORE_COLUMNS if column in by_lower), None)
    label = roles.get("label") or by_lower.get(LABEL_COLUMN)
    texts_named = any(role in roles for role in TEXT_ROLES)
    found = f"found columns {', '.join(columns.names)}"
    inferred = kind is None
    if kind is None:
        if "score" in by_lower:
            kind = "sts"
        elif LABEL_COLUMN in by_lower:
            kind = "classification"
        elif len(texts) in (2, 3):
            kind = "pairs"
        else:
            raise ConfigError(
                f"{where}: cannot tell what to evaluate ({found}); write sts:, classification: or pairs: before "
                "the file (text columns in order, then a 'score' or 'label' column)"
            )
    name = path.stem if path.is_file() else path.name
    if kind == "sts":
        if score is None or len(texts) != 2:
            raise ConfigError(
                f"{where}: sts needs two text columns and a 'score' (or 'label') column of numbers; {found} "
                "(name them with sts[text=COLUMN,pair=COLUMN,score=COLUMN]:PATH)"
            )
        return FileTask(
            name, "sts", "spearman", path, "sts", tuple(texts), score, inferred, dataset_split=dataset_split,
            roles=tuple(roles.items()),
        )
    if kind == "classification":
        if label is None or len(texts) not in (1, 2):
            raise ConfigError(
                f"{where}: classification needs one or two text columns and a 'label' column; {found} "
                "(name them with classification[text=COLUMN,label=COLUMN]:PATH)"
            )
        task_kind = "single" if len(texts) == 1 else "pair"
        return FileTask(
            name, task_kind, "accuracy", path, "classification", tuple(texts), label, inferred,
            dataset_split=dataset_split, roles=tuple(roles.items()),
        )
    if kind == "pairs":
        if (label_like and not texts_named) or len(texts) not in (2, 3):
            raise ConfigError(
                f"{where}: pairs needs two or three text columns (anchor, positive[, hard_negative]) and no "
                f"'label' or 'score' column; {found} (name them with pairs[text=COLUMN,pair=COLUMN]:PATH)"
            )
        return FileTask(
            name, "pairs", "mrr_at_10", path, "pairs", tuple(texts), None, inferred, dataset_split=dataset_split,
            roles=tuple(roles.items()),
        )
    raise UnknownNameError(f"{where}: unknown kind {kind!r}; kinds: {', '.join(EVAL_FILE_KINDS)}")


def _texts_of(text_columns: list[str], roles: dict[str, str], label_like: set[str], where: str) -> list[str]:
    """The text columns: the named text roles (text, pair, negative: in that order, none skipped), else every
    text column but the named ones and ``label`` / ``score``, in file order (training's ``data.columns`` rule)."""
    given, skipped = named_text_roles(roles)
    if given:
        if skipped is not None:
            raise ConfigError(f"{where}: [{given[-1]}=...] needs [{skipped}=...] too")
        return [roles[role] for role in given]
    named = set(roles.values())
    return [name for name in text_columns if name not in label_like and name not in named]


def _refuse_qrels(path: Path, names: list[str], kind: str | None, dataset_split: str | None) -> None:
    """A BEIR qrels file (header query-id, corpus-id, score) given as a table: one error naming the file."""
    if not beir.looks_like_qrels(names):
        return
    line = 1 if dataset_split is None and path.suffix.lower() in (".csv", ".tsv") else None
    folder = path.parent.parent if path.parent.name == "qrels" else None
    spec = f"ir:{folder}@{path.stem}" if folder is not None else "ir:FOLDER (corpus, queries and qrels/<split>.tsv)"
    raise DataFormatError(
        path,
        line,
        f"looks like BEIR qrels (columns {', '.join(names)}), not {kind + ' data' if kind else 'an evaluation table'}: "
        f"evaluate retrieval with {spec}",
    )


def load_eval_data(spec: EvalSpec | str, data_root: str | os.PathLike | None = None) -> EvalData:
    """The examples of ``spec``: a registry task's split from the data root, or the file's rows."""
    spec = parse_eval_spec(spec) if isinstance(spec, str) else spec
    if not spec.is_file:
        data: TaskData = load_task(spec.text, data_root)
        return EvalData(spec, list(data.examples), dict(data.subsets) if data.subsets else None, data.path)
    task: FileTask = spec.task
    if task.eval_kind == "ir":
        retrieval = beir.read_beir(task.path, spec.split, beir.BeirColumns(**dict(task.roles)))
        return EvalData(spec, [], None, task.path, retrieval=retrieval)
    read = _table_reader(task, spec.text)
    if task.eval_kind == "sts":
        examples, label_names = list(read("float")), None
    elif task.eval_kind == "classification":
        examples, label_names = _class_ids(task, list(read("str")))
    else:
        examples, label_names = list(read("str")), None
    if not examples:
        raise EmptyDataError(
            f"{task.path}: {task.eval_kind}: no row to evaluate (the file holds a header only)"
        )
    return EvalData(spec, examples, None, task.path, label_names)


def _table_reader(task: FileTask, spec: str):
    """``read(label_type) -> examples`` of the task's text and label columns, from its file or dataset split."""
    if task.dataset_split is None:
        return lambda label_type: read_table(
            task.path, task.text_columns, task.label_column, label_type=label_type
        )
    from contrastext.data.readers.lines import parse_float
    from contrastext.data.readers.table import parse_str_label, read_records

    def read(label_type: str):
        opened = _open_dataset(task.path, task.dataset_split, spec)
        parse = parse_float if label_type == "float" else parse_str_label
        return read_records(opened.where, opened.records(), task.text_columns, task.label_column, parse)

    return read


def _class_ids(task: FileTask, examples: list[Example]) -> tuple[list[Example], tuple[str, ...] | None]:
    """Integer labels as they are; string labels -> ids in sorted order (the names are returned)."""
    labels = [str(example.label) for example in examples]
    numbers = [_number(label) for label in labels]
    if all(number is not None for number in numbers):
        if any(not float(number).is_integer() for number in numbers):
            if task.inferred:
                raise ConfigError(
                    f"{task.path}: column {task.label_column!r} holds non-integer numbers, which look like "
                    f"similarity scores: write sts:{task.path} to evaluate them as STS, or use class names"
                )
            raise ConfigError(
                f"{task.path}: column {task.label_column!r}: classification needs class labels, found "
                f"non-integer numbers (for similarity scores write sts:{task.path})"
            )
        return [
            _relabel(example, int(number)) for example, number in zip(examples, numbers, strict=True)
        ], None
    names = tuple(sorted(set(labels)))
    index = {name: position for position, name in enumerate(names)}
    return [_relabel(example, index[label]) for example, label in zip(examples, labels, strict=True)], names


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def _relabel(example: Example, label: Any) -> Example:
    return Example(texts=example.texts, label=label, source=example.source)


def check_eval_specs(specs: Sequence[str]) -> list[EvalSpec]:
    """Every spec parsed (before any model is loaded); ConfigError when two give the same task name."""
    parsed = [parse_eval_spec(spec) for spec in specs]
    names = [spec.task.name for spec in parsed]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(
            f"task(s) {', '.join(repeated)} given more than once; results are keyed by task name, "
            "so evaluate one split of a task per run (rename one of two files with the same name)"
        )
    return parsed
