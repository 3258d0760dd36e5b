"""A run's data spec read into a column store: :func:`contrastext.data.sources.read_texts` for large files.

:func:`read_text_columns` chooses the columns exactly as ``read_texts`` does (:func:`~contrastext.data.sources.
column_layout`: the roles of ``data.columns``, else the sentence-transformers convention) and returns the
:class:`~contrastext.data.column_store.ColumnExamples` of ``data.path`` (CSV / TSV / JSONL) or of a local
``data.dataset`` folder, with the description a run reports. The shapes that are rebuilt row by row in memory
(list-valued columns made n-tuples, NLI rows made triplets) and ``.txt`` sentence files are a ConfigError naming
the file: they are read into memory.

Example::

    >>> store, description = read_text_columns(DataSpec(path="pairs.csv"), "pairs", who="mnrl")
    >>> len(store), description["columns"]
    (100000000, ['anchor', 'positive'])
"""

from __future__ import annotations

from pathlib import Path

from contrastext.data.column_convert import column_examples, dataset_column_examples
from contrastext.data.column_store import ColumnExamples
from contrastext.data.sources import DataSpec, Needs, column_layout, open_training_table
from contrastext.errors import ConfigError


def read_text_columns(
    spec: DataSpec, needs: Needs, who: str, cache_dir: str | Path | None = None, progress: bool | None = None
) -> tuple[ColumnExamples, dict]:
    """(the column store of ``spec``'s training texts, its description: source, file, columns, rows read, rows
    dropped as blank, the store's folder)."""
    spec.check()
    if not spec.is_user_data:
        raise ConfigError(f"{spec.origin}: the column store reads data.path or data.dataset, not a registry task")
    table = open_training_table(spec)
    if table.sentences:
        raise ConfigError(f"{spec.origin}: data.path: {table.where} is one sentence a line (.txt); the column store "
                          "reads CSV, TSV, JSONL or a datasets folder")  # fmt: skip
    layout = column_layout(table, spec.roles, needs, who, spec.origin)
    if layout.lists or layout.nli:
        shape = "list-valued columns" if layout.lists else "NLI rows"
        raise ConfigError(f"{spec.origin}: {table.where}: {shape} are rebuilt row by row in memory; the column store "
                          "reads one text a column")  # fmt: skip
    if spec.path is not None:
        store = column_examples(spec.path, layout.texts, cache_dir, progress)
    else:
        if not Path(spec.dataset).expanduser().exists():
            raise ConfigError(f"{spec.origin}: data.dataset {spec.dataset!r}: the column store reads a local folder")
        store = dataset_column_examples(spec.dataset, spec.split, layout.texts, cache_dir, progress)
    description = {"source": f"data.{spec.source}", "train": table.where, "n_rows": len(store) + store.dropped_blank,
                   "columns": list(layout.texts), "storage": "columns", "store": str(store.folder)}  # fmt: skip
    if store.dropped_blank:
        description["n_dropped_blank"] = store.dropped_blank
    return store, description


__all__ = ["read_text_columns"]
