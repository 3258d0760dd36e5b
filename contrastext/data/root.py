"""Where benchmark files are read from: ``--data-root``, else the ``CONTRASTEXT_DATA`` variable."""

from __future__ import annotations

import os
from pathlib import Path

from contrastext.errors import MissingDataError

DATA_ROOT_VARIABLE = "CONTRASTEXT_DATA"


def resolve_data_root(data_root: str | os.PathLike | None = None) -> Path:
    """Return the data root: the argument if given, else $CONTRASTEXT_DATA; it must be a folder."""
    if data_root is None:
        data_root = os.environ.get(DATA_ROOT_VARIABLE)
        if not data_root:
            raise MissingDataError(
                f"no data root: pass --data-root DIR or set {DATA_ROOT_VARIABLE} "
                "(the folder holding stsb/, glue/, senteval/, ...)"
            )
        how = f"${DATA_ROOT_VARIABLE}"
    else:
        how = "--data-root"
    root = Path(data_root).expanduser()
    if not root.is_dir():
        raise MissingDataError(f"data root {root} (from {how}) is not a folder")
    return root
