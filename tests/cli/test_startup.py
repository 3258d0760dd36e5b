"""The command line starts without scikit-learn, scipy, pandas or transformers: the evaluation code imports the
first three where it uses them and the encoder imports transformers where it builds a model or tokenizer, so
``contrastext --help``, a refused command and every process the suite starts (torchrun's included) skip ~1.5 s of
imports, and a command that loads no model ~0.7 s more."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("sklearn", "scipy", "pandas")


def imported_by(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    probe = f"{code}; import sys; print(' '.join(m for m in {modules!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_importing_the_command_line_loads_no_sklearn_scipy_or_pandas():
    assert imported_by("import contrastext.cli", HEAVY) == [], "imported at start-up"


def test_every_command_module_loads_without_transformers():
    """What ``contrastext --help`` imports (every command's module); transformers comes with the first model."""
    code = "import contrastext.cli as cli; cli._register_commands([])"
    assert imported_by(code, ("transformers", *HEAVY)) == [], "imported by the command modules"
