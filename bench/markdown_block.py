"""Write one benchmark's results into BENCHMARKS.md: its marked block is replaced, the rest of the file kept.

Each script owns a block between ``<!-- begin bench/NAME.py -->`` and ``<!-- end bench/NAME.py -->``; a file
without the block gets it appended under the script's section title.
"""

from __future__ import annotations

from pathlib import Path


def write_block(path: Path, block: str, begin: str, end: str, section: str) -> None:
    """Replace the text between ``begin`` and ``end`` in ``path`` with ``block`` (which holds both markers)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block.rstrip("\n") + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n{section}\n\n" + block
    path.write_text(text)
