"""Hugging Face ``datasets`` as a source of rows: a local ``save_to_disk`` folder, a folder (or file) of parquet /
json / csv files, or a hub name.

:func:`open_dataset_split` loads one split and returns a :class:`DatasetSplit`: its columns (the text ones are
the string-typed features), the class names of its ``ClassLabel`` features, and its rows as ``(row, record)``
pairs numbered from 1 (list-of-strings features are its ``columns.lists``), read into Examples by :func:`contrastext.data.readers.table.read_records`. Errors name
``<dataset>[<split>]:<row>``, as file errors name ``path:line``.

Nothing here needs the network for a local folder. A hub name that is not in the local cache cannot be read
offline: the error says so in one line (set ``HF_HUB_OFFLINE=1`` to fail at once instead of retrying).

Example::

    >>> split = open_dataset_split("data/reviews", split="train")       # Dataset.save_to_disk("data/reviews")
    >>> split.columns.texts, split.class_names
    (['text'], {'label': ['negative', 'positive']})
    >>> read_records(split.where, split.records(), ["text"], "label", parse_str_label)[0].label
    'positive'
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrastext.data.readers.lines import check_regular_file
from contrastext.data.readers.table import TableColumns
from contrastext.errors import ConfigError, EmptyDataError, MissingDataError

DEFAULT_SPLIT = "train"
# A local file read through `datasets`: the builder (and options) for its suffix.
BUILDERS: dict[str, tuple[str, dict]] = {
    ".parquet": ("parquet", {}),
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"delimiter": "\t"}),
    ".json": ("json", {}),
    ".jsonl": ("json", {}),
    ".txt": ("text", {}),
    ".arrow": ("arrow", {}),
}
SAVED_MARKERS = ("dataset_dict.json", "state.json")  # what save_to_disk writes (DatasetDict, Dataset)


@dataclass
class DatasetSplit:
    """One split of a dataset: where it is (for messages), its columns, ClassLabel names and rows."""

    where: str  # "<dataset>[<split>]"
    name: str  # a short name: the folder's or the hub name's last part
    split: str
    columns: TableColumns
    dataset: Any  # datasets.Dataset
    class_names: dict[str, list[str]] = field(default_factory=dict)

    def records(self) -> Iterator[tuple[int, dict]]:
        """``(row number from 1, record)``; ``ClassLabel`` values are given as their names."""
        return self.numbered(self.dataset, first=1)

    def numbered(self, rows, first: int) -> Iterator[tuple[int, dict]]:
        """``(row number, record)`` of ``rows`` (records of this split, the first being row ``first``), with
        ``ClassLabel`` values given as their names."""
        for number, record in enumerate(rows, start=first):
            for column, names in self.class_names.items():
                value = record.get(column)
                if isinstance(value, int) and 0 <= value < len(names):
                    record[column] = names[value]
            yield number, record


def open_dataset_split(
    dataset: str, split: str | None = None, config_name: str | None = None, key: str = "data.dataset"
) -> DatasetSplit:
    """Load ``split`` (default ``train``, or the only split) of ``dataset``; ``key`` names the config key in errors.

    A missing split lists the dataset's splits; a dataset that cannot be loaded is a one-line error naming it.
    """
    loaded = _load(dataset, config_name, split, key)
    chosen, table = _pick_split(loaded, dataset, split, key)
    import datasets
    class_names = {
        name: list(feature.names)
        for name, feature in table.features.items()
        if isinstance(feature, datasets.ClassLabel)
    }
    texts = [
        name
        for name, feature in table.features.items()
        if isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")
    ]
    lists = [
        name
        for name, feature in table.features.items()
        if isinstance(getattr(feature, "feature", None), datasets.Value)
        and feature.feature.dtype in ("string", "large_string")
    ]
    columns = TableColumns(list(table.column_names), texts, lists)
    if table.num_rows == 0:
        raise EmptyDataError(f"{dataset}[{chosen}]: the split has no rows")
    return DatasetSplit(f"{dataset}[{chosen}]", short_name(dataset), chosen, columns, table, class_names)


def short_name(dataset: str) -> str:
    """The last part of a folder path or hub name (``org/reviews`` -> ``reviews``), without a file suffix."""
    path = Path(dataset.rstrip("/\\"))
    return path.stem if path.suffix.lower() in BUILDERS else path.name


def _pick_split(loaded, dataset: str, split: str | None, key: str):
    import datasets

    if isinstance(loaded, datasets.Dataset):  # a Dataset saved on its own
        if split not in (None, DEFAULT_SPLIT):
            raise ConfigError(
                f"{key}: {dataset} is a single dataset without splits (read as the train split); it has no "
                f"split {split!r}"
            )
        return DEFAULT_SPLIT, loaded
    names = list(loaded)
    if split is None:
        if DEFAULT_SPLIT in loaded:
            split = DEFAULT_SPLIT
        elif len(names) == 1:
            split = names[0]
        else:
            raise ConfigError(f"{key}: {dataset} has no train split; name one with data.split ({', '.join(names)})")
    if split not in loaded:
        raise ConfigError(f"{key}: {dataset} has no split {split!r}; its splits: {', '.join(names) or 'none'}")
    return split, loaded[split]


def _load(dataset: str, config_name: str | None, split: str | None, key: str):
    """The Dataset / DatasetDict of ``dataset``; every loading failure becomes one line naming it."""
    try:
        import datasets
    except ImportError:  # pragma: no cover - a dependency
        raise ConfigError(f"{key}: reading {dataset!r} needs the `datasets` package: pip install datasets") from None
    path = Path(dataset).expanduser()
    local = path.exists()
    if local and not path.is_dir():
        check_regular_file(path, f"{key}:")  # a FIFO or a device: named, never handed to the loader
    try:
        with _quiet():
            if local and path.is_dir() and any((path / marker).is_file() for marker in SAVED_MARKERS):
                return datasets.load_from_disk(str(path))
            if local and path.is_file():
                builder, options = _builder(path, key)
                return datasets.load_dataset(builder, data_files=str(path), **options)
            if local:
                return datasets.load_dataset(str(path), name=config_name)
            return {split or DEFAULT_SPLIT: datasets.load_dataset(dataset, name=config_name, split=split or DEFAULT_SPLIT)}
    except ConfigError:
        raise
    except Exception as error:  # noqa: BLE001 - any failure of a third-party loader on the user's input
        reason = " ".join(str(error).split()) or type(error).__name__
        if local:
            raise ConfigError(f"{key}: cannot read the dataset {dataset}: {reason}") from None
        raise MissingDataError(
            f"{key}: cannot load the Hugging Face dataset {dataset!r}: no such local folder, and the hub could not "
            f"give it ({reason}); offline, only a local save_to_disk / parquet / json / csv folder or a cached "
            "dataset can be read"
        ) from None


def _builder(path: Path, key: str) -> tuple[str, dict]:
    suffix = path.suffix.lower()
    if suffix not in BUILDERS:
        raise ConfigError(
            f"{key}: cannot tell the format of {path} from its suffix; a file read with datasets is one of "
            f"{', '.join(BUILDERS)}"
        )
    return BUILDERS[suffix]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No progress bars and no retry chatter from ``datasets`` / ``huggingface_hub`` while loading: the
    result, or one error line, is all the user sees."""
    import datasets

    bars = datasets.utils.logging.is_progress_bar_enabled()
    datasets.utils.logging.disable_progress_bar()
    loggers = [logging.getLogger(name) for name in ("datasets", "huggingface_hub", "fsspec")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
        if bars:
            datasets.utils.logging.enable_progress_bar()
