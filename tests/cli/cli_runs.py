"""Run the console entry point in-process, as the CLI tests do."""

from __future__ import annotations

import pytest

from contrastext.cli import main


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run ``main(argv)``; return (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    captured = capsys.readouterr()
    code = exit_info.value.code
    return (0 if code is None else code), captured.out, captured.err
