"""Write one benchmark's results into BENCHMARKS.md: its marked block is replaced, the rest of the file kept.

Each script owns a block between ``<!-- begin bench/NAME.py -->`` and ``<!-- end bench/NAME.py -->``; a file
without the block gets it appended under the script's section title. ``--section-suffix TEXT`` (every script,
see :func:`add_suffix_option`) appends `` TEXT`` to both markers and to the section title, so runs of one script
under other conditions (a GPU, a precision) keep their own blocks side by side: ``<!-- begin bench/NAME.py
TEXT -->``. The markers and the title are built here only (:func:`markers`, :func:`heading`); an empty suffix
gives the plain ones.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def markers(script: str, suffix: str = "") -> tuple[str, str]:
    """The ``(begin, end)`` markers of ``bench/<script>``'s block, ``suffix`` (if any) after the script name."""
    name = f"bench/{script}" + (f" {suffix}" if suffix else "")
    return f"<!-- begin {name} -->", f"<!-- end {name} -->"


def heading(section: str, suffix: str = "") -> str:
    """The section title the block is appended under when the file lacks its markers, ``suffix`` appended."""
    return f"{section} {suffix}" if suffix else section


def section_suffix(text: str) -> str:
    """argparse type of ``--section-suffix``: one line of text that cannot end a marker (no ``-->``)."""
    text = text.strip()
    if "\n" in text or "-->" in text or "<!--" in text:
        raise argparse.ArgumentTypeError(f"--section-suffix must be one line without '<!--' or '-->', got {text!r}")
    return text


def add_suffix_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--section-suffix", type=section_suffix, default="",
        help="text appended to this script's block markers and section title in --output (e.g. 'H100 bf16'), "
        "so blocks of several runs live in one file; default: none (the plain markers)",
    )


def write_block(path: Path, block: str, begin: str, end: str, section: str) -> None:
    """Replace the text between ``begin`` and ``end`` in ``path`` with ``block`` (which holds both markers)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block.rstrip("\n") + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n{section}\n\n" + block
    path.write_text(text)


def write_script_block(path: Path, block: str, script: str, section: str, suffix: str = "") -> None:
    """:func:`write_block` with the markers and title of ``bench/<script>`` under ``suffix``."""
    write_block(path, block, *markers(script, suffix), heading(section, suffix))
