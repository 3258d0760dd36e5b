"""One data spec for every recipe: a registry task, a user's file or a Hugging Face dataset -> Examples.

A recipe's ``data:`` names ONE source (:class:`DataSpec`):

- ``task``: a registry task (:mod:`contrastext.data.tasks`; the only source that reads the data root);
- ``path``: a file, by suffix: ``.csv`` (comma), ``.tsv`` (tab; both with CSV quoting and a header row),
  ``.jsonl`` / ``.json`` (one JSON object a line), ``.txt`` (one sentence a line);
- ``dataset``: a Hugging Face dataset (:mod:`contrastext.data.readers.hf_datasets`): a local ``save_to_disk``
  folder, a folder or file of parquet / json / csv files, or a hub name; ``split`` picks the split.

Which source wins (:func:`choose_source`): a source given with ``--set`` replaces the recipe file's; two sources
at the same level (both in the file, or both with ``--set``) are a ConfigError naming both. A source is never
ignored.

Which column is what (``columns``, roles ``text``, ``pair``, ``negative``, ``label``, ``score``;
:func:`column_layout`): by default the sentence-transformers convention, every column but ``label`` / ``score``
is a text, in file order (for JSONL and datasets: the string-valued ones), and a ``label`` column (classes) or
else a ``score`` column (numbers) is the target. What a recipe reads (``needs``): ``sentences`` (one text:
unsupervised SimCSE, gd, CAPT), ``pairs`` (two or three texts: supervised SimCSE) or ``labelled`` (one text or a
pair, and a target: SCL, RECLAIM, fine-tuning).

The data shapes of retrieval users (docs/RETRIEVAL.md, "Data shapes"), for recipes on pairs:

- n-tuple files, sentence-transformers' (anchor, positive, ``negative_1`` … ``negative_n``) columns (what ``contrastext
  mine --output-format n-tuple`` writes), are read as they are: 2 + n texts a row;
- list-valued columns (JSONL / datasets: ``{"query": "...", "pos": [..], "neg": [..]}``): the positive column and
  the negative column may hold lists; the rows become one example per positive with the negatives as n-tuple
  columns, n by ``num_negatives`` (:mod:`contrastext.data.readers.ntuples`);
- NLI rows (premise, hypothesis, ``label``) for a recipe that asks for them (``read_texts(..., nli=True)``:
  supervised SimCSE) become SimCSE's triplets (:mod:`contrastext.data.nli`): two text columns and a ``label``
  column by default, or ``columns.label``; text roles named without ``columns.label`` read the pairs as they are;
- a column that is read by no role (a ``label`` or ``score`` column a recipe does not use, a text column left out
  by ``columns``) is named in :attr:`Layout.unused`, which the run reports in one line: nothing is dropped
  silently.

Labels may be strings (:func:`label_set`, :func:`index_labels`): the classes are the training labels, sorted
(integer labels numerically; a label that reads as an integer, ``1.0``, is that integer, ``1``), or
``label_names`` in that order; a label outside them is an error naming ``file:line``. Any number of classes.

Example::

    >>> spec = DataSpec(path="reviews.csv", origin="my.yaml")          # text,label with label in {bad, ok, good}
    >>> data = read_labelled(spec, who="scl")
    >>> data.task.num_labels, data.task.label_names, data.train[0].label
    (3, ('bad', 'good', 'ok'), 2)
    >>> read_texts(DataSpec(path="pairs.tsv"), needs="pairs", who="simcse-sup").examples[0].texts
    ('a question', 'its answer')
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

from contrastext.data.examples import Example
from contrastext.data.nli import nli_triplets
from contrastext.data.readers.lines import ExampleList, parse_float, require_file
from contrastext.data.readers.ntuples import read_ntuples
from contrastext.data.readers.simcse import read_sentences
from contrastext.data.readers.table import (
    FORMAT_BY_SUFFIX,
    LabelType,
    TableColumns,
    json_records,
    parse_str_label,
    read_records,
    read_table,
    table_columns,
)
from contrastext.data.task_kinds import CLASSIFICATION_KINDS
from contrastext.data.tasks import Task
from contrastext.errors import ConfigError, DataFormatError, EmptyDataError

SOURCE_KEYS = ("task", "path", "dataset")
TEXT_ROLES = ("text", "pair", "negative")
TARGET_ROLES = ("label", "score")
ROLES = TEXT_ROLES + TARGET_ROLES
SENTENCE_SUFFIXES = (".txt",)
FILE_SUFFIXES = (*FORMAT_BY_SUFFIX, *SENTENCE_SUFFIXES)
DEFAULT_HOLDOUT = 0.2
"""Share of a user's labelled training data held out for evaluation when no evaluation data is named."""

Needs = Literal["sentences", "pairs", "labelled"]
NEEDS: dict[str, str] = {
    "sentences": "single sentences",
    "pairs": "pairs (text, pair) or triplets (text, pair, negative)",
    "labelled": "a text or a pair, and a label or score",
}


@dataclass(frozen=True)
class DataSpec:
    """A recipe's ``data`` section as plain values (the data layer does not know the config classes).

    ``origin`` names the config file in messages; ``columns`` maps a role to a column name (None: unused).
    """

    task: str | None = None
    path: str | None = None
    dataset: str | None = None
    dataset_config: str | None = None
    split: str | None = None
    columns: Mapping[str, str | None] | None = None
    label_names: Sequence[str] | None = None
    eval_path: str | None = None
    eval_split: str | None = None
    num_negatives: int | None = None
    origin: str = "<config>"

    @property
    def source(self) -> str | None:
        """The source key that is set (``task``, ``path`` or ``dataset``); None when none is."""
        return next((key for key in SOURCE_KEYS if getattr(self, key) is not None), None)

    @property
    def is_user_data(self) -> bool:
        """A user's file or dataset (not a registry task)."""
        return self.path is not None or self.dataset is not None

    @property
    def roles(self) -> dict[str, str]:
        """The roles given in ``columns`` (those set)."""
        return {role: column for role, column in (self.columns or {}).items() if column}

    def check(self) -> None:
        """ConfigError for keys that do not go with the source (``columns`` of a registry task, ...)."""
        given = [key for key in SOURCE_KEYS if getattr(self, key) is not None]
        if len(given) > 1:
            raise ConfigError(f"{self.origin}: {' and '.join(f'data.{key}' for key in given)} both name the data")
        extras = {
            "columns": self.roles,
            "label_names": self.label_names,
            "eval_path": self.eval_path,
            "split": self.split,
            "eval_split": self.eval_split,
            "dataset_config": self.dataset_config,
            "num_negatives": self.num_negatives,
        }
        if self.task is not None:
            for key, value in extras.items():
                if value or (key == "num_negatives" and value is not None):
                    raise ConfigError(
                        f"{self.origin}: data.{key} applies to data.path or data.dataset; data.task "
                        f"{self.task!r} is a registry task with fixed columns and splits (e.g. data.task: sst2:train)"
                    )
        if self.path is not None:
            for key in ("split", "eval_split", "dataset_config"):
                if extras[key]:
                    raise ConfigError(
                        f"{self.origin}: data.{key} applies to data.dataset; data.path {self.path!r} is one file "
                        "(evaluation rows: data.eval_path)"
                    )
        if self.eval_path is not None and self.eval_split is not None:
            raise ConfigError(f"{self.origin}: data.eval_path and data.eval_split both name the evaluation data")
        unknown = sorted(set(self.columns or {}) - set(ROLES))
        if unknown:
            raise ConfigError(f"{self.origin}: data.columns.{unknown[0]}: unknown role; roles: {', '.join(ROLES)}")


def choose_source(
    values: Mapping[str, object], overridden: Collection[str], origin: str = "<config>"
) -> str | None:
    """The source key (of ``task``, ``path``, ``dataset``) that names the training data.

    ``values`` holds each key's value (None: not given), ``overridden`` the dotted keys given with ``--set``.
    A source given with ``--set`` replaces the file's; two at the same level are a ConfigError naming both.
    """

    def from_set(key: str) -> bool:
        return f"data.{key}" in overridden or "data" in overridden

    given = [key for key in SOURCE_KEYS if values.get(key) is not None]
    command_line = [key for key in given if from_set(key)]
    level = command_line or given
    if len(level) > 1:
        where = "--set " + " and --set ".join(f"data.{key}" for key in level) if command_line else origin
        named = " and ".join(f"data.{key} ({values[key]!r})" for key in level)
        raise ConfigError(f"{where}: {named} both name the training data; give one source")
    return level[0] if level else None


# ----------------------------------------------------------------------------------------------- tables


@dataclass
class Table:
    """One readable table: a file, or one split of a dataset. ``where`` names it in messages; ``name`` is its
    short name (the metric keys' task name); ``class_names`` the ClassLabel names of a dataset's columns."""

    where: str
    name: str
    columns: TableColumns
    read: Callable[[Sequence[str], str | None, LabelType], ExampleList]
    class_names: dict[str, list[str]] = field(default_factory=dict)
    sentences: bool = False  # a .txt file: one sentence a line, no columns
    records: Callable[[], Iterable[tuple[int, Mapping]]] | None = None  # raw rows (JSONL, datasets): list columns


def safe_name(text: str) -> str:
    """A name fit for metric keys (``<name>_<split>_<metric>``): letters, digits, ``-`` and ``_``."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "data"


def open_file(path: str, key: str = "data.path", origin: str = "<config>") -> Table:
    """A user's file as a :class:`Table` (format by suffix); a folder or unknown suffix is a ConfigError."""
    file = Path(path).expanduser()
    if file.is_dir():
        raise ConfigError(
            f"{origin}: {key}: {file} is a folder; a folder of parquet / json / csv files or a save_to_disk folder "
            "is read with data.dataset"
        )
    suffix = file.suffix.lower()
    if suffix not in FILE_SUFFIXES:
        raise ConfigError(
            f"{origin}: {key}: cannot tell the format of {file} from its suffix; use .csv, .tsv, .jsonl / .json "
            "(one object a line) or .txt (one sentence a line), or read it with data.dataset (e.g. parquet)"
        )
    require_file(file)
    name = safe_name(file.stem)
    if suffix in SENTENCE_SUFFIXES:
        return Table(
            str(file), name, TableColumns([], []), lambda texts, target, kind: read_sentences(file), sentences=True
        )

    def read(texts: Sequence[str], target: str | None, kind: LabelType) -> ExampleList:
        return read_table(file, texts, target, label_type=kind)

    records = (lambda: json_records(file)) if FORMAT_BY_SUFFIX[suffix] == "jsonl" else None
    return Table(str(file), name, table_columns(file), read, records=records)


def open_dataset(
    dataset: str, split: str | None, config_name: str | None = None, key: str = "data.dataset"
) -> Table:
    """One split of a Hugging Face dataset as a :class:`Table`."""
    from contrastext.data.readers.hf_datasets import open_dataset_split

    opened = open_dataset_split(dataset, split, config_name, key=key)

    def read(texts: Sequence[str], target: str | None, kind: LabelType) -> ExampleList:
        parse = {"str": parse_str_label, "float": parse_float}.get(kind)
        if parse is None:
            raise ValueError(f"label type {kind!r}: datasets rows are read with 'str' or 'float' targets")
        return read_records(opened.where, opened.records(), texts, target, parse)

    return Table(
        opened.where, safe_name(opened.name), opened.columns, read, class_names=opened.class_names,
        records=opened.records,
    )


def open_training_table(spec: DataSpec) -> Table:
    """The table of ``spec.path`` or ``spec.dataset`` (split ``spec.split``)."""
    if spec.path is not None:
        return open_file(spec.path, "data.path", spec.origin)
    if spec.dataset is not None:
        return open_dataset(spec.dataset, spec.split, spec.dataset_config)
    raise ValueError("open_training_table: the spec names no file or dataset")


# ---------------------------------------------------------------------------------------------- columns


@dataclass(frozen=True)
class Layout:
    """Which columns are read: the texts in order, and the target (a ``label`` or a ``score`` column).

    ``lists``: the text columns holding lists (one example per positive, the negatives as n-tuple columns);
    ``nli``: (premise, hypothesis) read with their ``label`` as NLI rows, made SimCSE's triplets; ``unused``: the
    table's columns read by no role (reported, never dropped silently)."""

    texts: tuple[str, ...]
    target: str | None = None
    target_kind: Literal["label", "score"] | None = None
    lists: tuple[str, ...] = ()
    nli: bool = False
    unused: tuple[str, ...] = ()

    def describe(self) -> str:
        shown = ", ".join(self.texts)
        return shown + (f"; {self.target_kind} {self.target}" if self.target else "")

    def unused_note(self, who: str, where: str) -> str | None:
        """The line naming the columns ``who`` does not read (a ``label`` / ``score`` column first), or None."""
        if not self.unused:
            return None
        targets = [column for column in self.unused if column in TARGET_ROLES]
        others = [column for column in self.unused if column not in TARGET_ROLES]
        parts = [f"the {column} column" for column in targets]
        if others:
            parts.append(f"the column{'s' if len(others) > 1 else ''} {', '.join(others)}")
        read = ", ".join(self.texts) + (f" and {self.target_kind} {self.target}" if self.target else "")
        line = f"{where}: {who} does not use {' and '.join(parts)} (it reads {read})"
        if targets:
            line += "; its rows are all trained on, whatever their " + " or ".join(targets)
        return line


def column_layout(
    table: Table, roles: Mapping[str, str], needs: Needs, who: str, origin: str = "<config>", nli: bool = False
) -> Layout:
    """The columns ``who`` (a recipe name, for messages) reads from ``table`` (see the module docstring).

    ``nli``: the recipe reads (premise, hypothesis, label) rows as NLI triplets (``needs="pairs"`` only): two
    text columns and a ``label`` column (or ``data.columns.label``) make an NLI layout."""
    if needs not in NEEDS:
        raise ValueError(f"needs must be one of {', '.join(NEEDS)}, not {needs!r}")
    if table.sentences:
        if roles:
            raise ConfigError(
                f"{origin}: data.columns: {table.where} holds one sentence a line and has no columns; "
                "use a .csv, .tsv or .jsonl file to choose columns"
            )
        if needs != "sentences":
            raise ConfigError(
                f"{origin}: {who} trains on {NEEDS[needs]}; {table.where} holds one sentence a line (.txt): "
                "use a .csv, .tsv or .jsonl file with named columns"
            )
        return Layout(("text",))
    names = table.columns.names
    for role, column in roles.items():
        if column not in names:
            raise ConfigError(
                f"{origin}: data.columns.{role}: no column {column!r} in {table.where}; its columns: {', '.join(names)}"
            )
    if "label" in roles and "score" in roles:
        raise ConfigError(f"{origin}: data.columns.label and data.columns.score: give one target column")
    target_role = next((role for role in TARGET_ROLES if role in roles), None)
    default_target = next((role for role in TARGET_ROLES if role in names), None)
    nli_allowed = nli and needs == "pairs" and target_role in (None, "label")
    if needs != "labelled" and target_role is not None and not nli_allowed:
        raise ConfigError(
            f"{origin}: data.columns.{target_role}: {who} trains on {NEEDS[needs]} without labels; remove it"
        )
    texts = _text_columns(table, roles, needs, who, origin)
    lists = tuple(column for column in texts if column in table.columns.lists)
    if needs == "labelled":
        role = target_role or default_target
        if role is None:
            raise ConfigError(
                f"{origin}: {who} fine-tunes on labelled data; {table.where} has no 'label' or 'score' column "
                f"(its columns: {', '.join(names)}): name the target with data.columns.label (classes) or "
                "data.columns.score (numbers)"
            )
        layout = Layout(texts, roles.get(role, role), role)
    elif nli_allowed and len(texts) == 2 and not lists and (target_role or ("label" in names and not roles)):
        layout = Layout(texts, roles.get("label", "label"), "label", nli=True)
    elif target_role is not None:
        raise ConfigError(
            f"{origin}: data.columns.label: {who} reads a label only on NLI rows (premise, hypothesis, label); "
            f"{table.where} gives the texts {', '.join(texts)}: remove it"
        )
    else:
        layout = Layout(texts, lists=lists)
    read = set(layout.texts) | {layout.target}
    return replace(layout, lists=lists, unused=tuple(column for column in names if column not in read))


def named_text_roles(roles: Mapping[str, str]) -> tuple[list[str], str | None]:
    """The text roles that ``roles`` names, in :data:`TEXT_ROLES` order, and the first one skipped before the last
    of them (None when none is: text, pair and negative are named in that order). Training's ``data.columns`` and
    an evaluation spec's ``[text=...,pair=...]`` both follow this rule."""
    given = [role for role in TEXT_ROLES if role in roles]
    skipped = next((role for role in TEXT_ROLES[: len(given)] if role not in roles), None)
    return given, skipped


def _text_columns(table: Table, roles: Mapping[str, str], needs: Needs, who: str, origin: str) -> tuple[str, ...]:
    lists = table.columns.lists
    given, skipped = named_text_roles(roles)
    if given:
        if skipped is not None:
            raise ConfigError(f"{origin}: data.columns.{given[-1]} needs data.columns.{skipped} too")
        texts = tuple(roles[role] for role in given)
        counts = {"sentences": (1,), "pairs": (2, 3), "labelled": (1, 2)}[needs]
        if len(texts) not in counts:
            raise ConfigError(
                f"{origin}: data.columns: {who} trains on {NEEDS[needs]}; got the roles {', '.join(given)}"
            )
        for role, column in zip(given, texts, strict=True):
            if column in lists and (needs != "pairs" or role == "text"):
                what = "the anchor" if needs == "pairs" else NEEDS[needs]
                raise ConfigError(
                    f"{origin}: data.columns.{role}: the column {column!r} of {table.where} holds lists; {who} reads "
                    f"one text a row for {what} (lists are read as the positives and negatives of pairs: "
                    "data.columns.pair, data.columns.negative)"
                )
        return texts
    targets = set(TARGET_ROLES) | set(roles.values())
    texts = tuple(column for column in table.columns.texts if column not in targets)
    listed = tuple(column for column in lists if column not in targets)
    shown = ", ".join(texts) or "none"
    if listed:
        skipped = f" (and the list-valued columns {', '.join(listed)}, which {who} reads for pairs only)"
        if needs == "pairs":
            skipped = f" and the list-valued columns {', '.join(listed)}"
        shown += skipped
    if needs == "sentences" and len(texts) != 1:
        raise ConfigError(
            f"{origin}: {who} trains on single sentences; {table.where} has the text columns {shown}: "
            "choose one with data.columns.text"
        )
    if needs == "pairs":
        candidates = tuple(column for column in table.columns.names if column in texts or column in listed)
        if is_ntuple_header(candidates) and not listed:
            return candidates
        if len(candidates) not in (2, 3) or candidates[0] in listed:
            first = (
                f"; the first, {candidates[0]!r}, holds lists and the anchor is one text a row"
                if candidates and candidates[0] in listed and len(candidates) in (2, 3) else ""
            )
            raise ConfigError(
                f"{origin}: {who} trains on {NEEDS[needs]}; {table.where} has the text columns {shown}{first}: "
                "name them with data.columns.text, .pair (and .negative)"
            )
        return candidates
    if needs == "labelled" and len(texts) not in (1, 2):
        raise ConfigError(
            f"{origin}: {who} fine-tunes on one text or a pair; {table.where} has the text columns {shown}: "
            "name them with data.columns.text (and .pair)"
        )
    return texts


def is_ntuple_header(columns: Sequence[str]) -> bool:
    """sentence-transformers' n-tuple columns: anchor, positive, then ``negative_1 … negative_n`` (n ≥ 2; what
    ``mine_hard_negatives(output_format="n-tuple")`` and ``contrastext mine --output-format n-tuple`` write)."""
    negatives = list(columns[2:])
    return len(negatives) >= 2 and negatives == [f"negative_{n}" for n in range(1, len(negatives) + 1)]


# ------------------------------------------------------------------------------------------------ texts


@dataclass
class TextData:
    """Unlabelled training examples (sentences, pairs, triplets or n-tuples) and where they came from;
    ``notes``: the lines the run prints about how the rows were read (list columns, NLI rows, unused columns),
    ``unused_targets``: the ``label`` / ``score`` columns the recipe does not read (the run warns)."""

    examples: ExampleList
    description: dict
    notes: list[str] = field(default_factory=list)
    unused_targets: list[str] = field(default_factory=list)


def read_texts(spec: DataSpec, needs: Needs, who: str, nli: bool = False) -> TextData:
    """Sentences (``needs="sentences"``) or pairs / triplets / n-tuples (``"pairs"``) of ``spec.path`` /
    ``spec.dataset``; ``nli``: (premise, hypothesis, label) rows become SimCSE's triplets (module docstring)."""
    spec.check()
    if spec.label_names or spec.eval_path or spec.eval_split:
        key = "label_names" if spec.label_names else "eval_path" if spec.eval_path else "eval_split"
        raise ConfigError(
            f"{spec.origin}: data.{key}: {who} trains on {NEEDS[needs]} without labels; its evaluation is eval.tasks"
        )
    table = open_training_table(spec)
    layout = column_layout(table, spec.roles, needs, who, spec.origin, nli=nli)
    _check_num_negatives(spec, layout, table, needs, who)
    notes: list[str] = []
    description = {"source": f"data.{spec.source}", "train": table.where}
    if layout.lists and table.records is not None:
        examples, counts = read_ntuples(table.where, table.records(), *layout.texts, num_negatives=spec.num_negatives)
        notes.append(counts.describe(table.where, layout.texts))
        description["n_rows"] = counts.rows
        description["ntuples"] = asdict(counts)
    elif layout.nli:
        rows = table.read(layout.texts, layout.target, "str")
        examples, counts = nli_triplets(rows)
        notes.append(counts.describe(table.where))
        description["n_rows"] = counts.rows
        description["nli"] = asdict(counts)
        if not examples and rows:
            raise EmptyDataError(
                f"{table.where}: no NLI triplet: no premise has both an entailment and a contradiction hypothesis "
                f"({counts.entailment} entailment, {counts.contradiction} contradiction, {counts.neutral} neutral "
                "rows; labels 0 / 1 / 2 read as entailment / neutral / contradiction); to train on the pairs as "
                f"they are, name them with data.columns.text and data.columns.pair (the {layout.target} column is "
                "then not read)"
            )
    else:
        examples = table.read(layout.texts, None, "str")
        description["n_rows"] = len(examples)
    if not examples:
        raise EmptyDataError(f"{table.where}: no example: the file is empty or holds a header only")
    if not table.sentences:
        description["columns"] = [*layout.texts, layout.target] if layout.nli else list(layout.texts)
    unused = layout.unused_note(who, table.where)
    targets = [column for column in layout.unused if column in TARGET_ROLES]
    if unused:
        description["unused_columns"] = list(layout.unused)
        if not targets:
            notes.append(unused)
    return TextData(examples, description, notes, [unused] if targets else [])


def _check_num_negatives(spec: DataSpec, layout: Layout, table: Table, needs: Needs, who: str) -> None:
    """``data.num_negatives`` applies to a list-valued negative column; elsewhere it must equal the fixed count."""
    if spec.num_negatives is None:
        return
    negative_listed = needs == "pairs" and len(layout.texts) == 3 and layout.texts[2] in layout.lists
    if negative_listed:
        return
    fixed = max(len(layout.texts) - 2, 0) if needs == "pairs" and not layout.nli else (1 if layout.nli else 0)
    if spec.num_negatives != fixed:
        raise ConfigError(
            f"{spec.origin}: data.num_negatives={spec.num_negatives}: {table.where} has no list-valued negative "
            f"column ({who} reads {layout.describe()}: {fixed} negative{'s' if fixed != 1 else ''} a row); it "
            "chooses n for a column of negative lists (JSONL / datasets)"
        )


# --------------------------------------------------------------------------------------------- labelled


@dataclass
class LabelledData:
    """A user's labelled training rows (labels as class ids, or scores), their task, and the evaluation rows
    when ``data.eval_path`` / ``data.eval_split`` name them (else None: the caller holds some out)."""

    task: Task
    train: list[Example]
    eval: list[Example] | None
    eval_split: str
    train_name: str
    eval_name: str | None
    layout: Layout
    eval_key_name: str | None = None  # data.eval_path's short name: the evaluation keys are named after it
    unused_note: str | None = None  # the line naming the columns read by no role (Layout.unused_note)


def canonical_label(value: object) -> str:
    """A label as text: stripped, and a number with an integer value written as that integer (``1.0`` -> ``1``)."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if math.isfinite(number) and number.is_integer():
        return str(int(number))
    return text


def label_set(examples: Sequence[Example], given: Sequence[str] | None = None, what: str = "data.label_names") -> list[str]:
    """The class names in id order: ``given`` (checked: every training label must be in it), else the distinct
    training labels, sorted (numerically when every one is an integer)."""
    labels = {canonical_label(example.label) for example in examples}
    if given is not None:
        names = [canonical_label(name) for name in given]
        if len(set(names)) != len(names):
            raise ConfigError(f"{what}: a label is named twice in {list(given)}")
        known = set(names)
        for example in examples:
            if canonical_label(example.label) not in known:
                raise DataFormatError(
                    example.source or "<examples>", None,
                    f"label {example.label!r} is not in {what} ({', '.join(names)})",
                )
        return names
    if all(re.fullmatch(r"-?\d+", label) for label in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def index_labels(examples: Sequence[Example], names: Sequence[str], seen_in: str = "the training data") -> list[Example]:
    """``examples`` with each label replaced by its id in ``names``; a label outside them is a DataFormatError
    naming the row's ``file:line`` (an evaluation label never seen in training)."""
    ids = {name: index for index, name in enumerate(names)}
    result = []
    for example in examples:
        label = canonical_label(example.label)
        if label not in ids:
            raise DataFormatError(
                example.source or "<examples>", None,
                f"label {example.label!r} was not seen in {seen_in} (its labels: {', '.join(names)})",
            )
        result.append(Example(example.texts, ids[label], example.source))
    return result


def user_task(name: str, kind: str, label_names: Sequence[str] | None, description: str = "") -> Task:
    """A :class:`~contrastext.data.tasks.Task` for a user's data: kind ``single`` / ``pair`` (classes, scored
    by accuracy) or ``regression`` (a score, scored by Pearson correlation); read through this module, not
    the registry (no splits, no reader)."""

    def no_reader(path):
        raise ConfigError(f"task {name!r} is a user's data set; it is read with its data spec, not the registry")

    classes = kind in CLASSIFICATION_KINDS
    return Task(
        name=name,
        kind=kind,  # type: ignore[arg-type]
        metric="accuracy" if classes else "pearson",
        num_labels=len(label_names) if classes and label_names is not None else (None if classes else 1),
        label_names=tuple(label_names) if classes and label_names is not None else None,
        splits={},
        default_split="train",
        reader=no_reader,
        description=description,
    )


def read_labelled(spec: DataSpec, who: str) -> LabelledData:
    """The labelled training rows of ``spec.path`` / ``spec.dataset``, and its evaluation rows
    (``spec.eval_path`` / ``spec.eval_split``) when named. See the module docstring for the columns and labels."""
    spec.check()
    if spec.num_negatives is not None:
        raise ConfigError(f"{spec.origin}: data.num_negatives: {who} fine-tunes on labelled rows, without negatives")
    table = open_training_table(spec)
    layout = column_layout(table, spec.roles, "labelled", who, spec.origin)
    regression = layout.target_kind == "score"
    if regression and len(layout.texts) != 2:
        raise ConfigError(
            f"{spec.origin}: {who}: a score target is fitted on text pairs; {table.where} gives one text "
            f"({layout.texts[0]}): name the pair with data.columns.pair, or use a label column for classes"
        )
    if regression and spec.label_names:
        raise ConfigError(f"{spec.origin}: data.label_names: {table.where}'s target is a score, not classes")
    kind: LabelType = "float" if regression else "str"
    train = table.read(layout.texts, layout.target, kind)
    if not train:
        raise EmptyDataError(f"{table.where}: no example: the file is empty or holds a header only")
    evaluation, eval_table = None, None
    if spec.eval_path is not None:
        eval_table = open_file(spec.eval_path, "data.eval_path", spec.origin)
    elif spec.eval_split is not None:
        eval_table = open_dataset(spec.dataset, spec.eval_split, spec.dataset_config, key="data.eval_split")
    if eval_table is not None:
        missing = [column for column in (*layout.texts, layout.target) if column not in eval_table.columns.names]
        if missing:
            raise ConfigError(
                f"{spec.origin}: {eval_table.where}: no column {missing[0]!r} (the training data's columns are "
                f"{layout.describe()}); its columns: {', '.join(eval_table.columns.names)}"
            )
        evaluation = eval_table.read(layout.texts, layout.target, kind)
        if not evaluation:
            raise EmptyDataError(f"{eval_table.where}: no example: the file is empty or holds a header only")
    names = None
    if not regression:
        given = spec.label_names or table.class_names.get(layout.target)
        names = label_set(train, given, "data.label_names" if spec.label_names else f"{table.where}'s class names")
        if len(names) < 2:
            raise ConfigError(
                f"{spec.origin}: {table.where}: fine-tuning needs two classes at least; every training label is "
                f"{names[0]!r}"
            )
        train = index_labels(train, names)
        if evaluation is not None:
            evaluation = index_labels(evaluation, names, f"the training data ({table.where})")
    task_kind = "regression" if regression else ("single" if len(layout.texts) == 1 else "pair")
    task = user_task(table.name, task_kind, names, description=f"{table.where} ({layout.describe()})")
    eval_split = "eval" if spec.eval_path is not None else (spec.eval_split or "holdout")
    return LabelledData(
        task=task,
        train=list(train),
        eval=None if evaluation is None else list(evaluation),
        eval_split=safe_name(eval_split),
        train_name=table.where,
        eval_name=None if eval_table is None else eval_table.where,
        layout=layout,
        eval_key_name=eval_table.name if spec.eval_path is not None else None,
        unused_note=layout.unused_note(who, table.where),
    )


__all__ = [
    "DEFAULT_HOLDOUT",
    "DataSpec",
    "LabelledData",
    "Layout",
    "Table",
    "TextData",
    "canonical_label",
    "choose_source",
    "column_layout",
    "index_labels",
    "label_set",
    "open_dataset",
    "open_file",
    "read_labelled",
    "read_texts",
    "user_task",
]
