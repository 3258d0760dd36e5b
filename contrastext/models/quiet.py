"""Quiet loading: no transformers progress bars ("Loading weights", "Writing model shards") while inside, so a
command's output (or its one `error:` line) is not buried in them.

Example::

    >>> with quiet_transformers():
    ...     encoder = TextEncoder.load(path)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Disable transformers' progress bars inside the block; restore them after."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """:func:`quiet_transformers` and transformers' LOAD REPORT table (missing / unexpected / mismatched tensors)
    silenced: the caller checks the loading info itself (``weights.check_loaded_backbone``) and reports in one
    line, so a refusal is the only line a command prints."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with quiet_transformers():
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
