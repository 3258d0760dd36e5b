"""The command line starts without scikit-learn, scipy or pandas: the evaluation code imports them where it uses
them, so ``contrastext --help``, a refused command and every process the suite starts (torchrun's included) skip
~1.5 s of imports."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("sklearn", "scipy", "pandas")


def test_importing_the_command_line_loads_no_sklearn_scipy_or_pandas():
    code = f"import sys, contrastext.cli; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported at start-up: {done.stdout.strip()}"
