"""The package's layering: no module imports from a package above its own (docs/ARCHITECTURE.md, "Layers").

The import graph is read from the source with ``ast`` (every ``import`` / ``from ... import``, including
imports inside functions), so a lazy import cannot hide an upward dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "contrastext"

# Bottom to top. A package may import itself and any package of a LOWER layer.
LAYERS: list[tuple[str, ...]] = [
    ("errors",),
    ("runtime",),
    ("data",),
    ("models",),
    ("negatives",),
    ("objectives",),
    ("integrations",),  # adapters of the objectives to other libraries' trainers (sentence-transformers)
    ("evaluation",),
    ("training",),
    ("methods",),
    ("runs",),
    ("cli", "__main__", "__init__"),
]
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}


def package_of(module: str) -> str | None:
    """``contrastext.data.tasks`` -> ``data``; None for modules outside the package."""
    parts = module.split(".")
    if parts[0] != "contrastext":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every absolute or relative import in a file."""
    relative_to = ["contrastext", *path.relative_to(PACKAGE).with_suffix("").parts]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = relative_to[: len(relative_to) - node.level]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


def upward_imports() -> list[str]:
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        for line, module in imports_of(path):
            target = package_of(module)
            if target is None or target == own:
                continue
            if LEVEL[target] > LEVEL[own]:
                violations.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {own} imports {module} (above it)")
    return violations


def test_every_package_is_placed_in_a_layer():
    packages = {path.name.removesuffix(".py") for path in PACKAGE.iterdir() if not path.name.startswith("_")
                and (path.is_dir() and (path / "__init__.py").exists() or path.suffix == ".py")}
    assert packages <= set(LEVEL), f"place these in LAYERS: {sorted(packages - set(LEVEL))}"


def test_no_package_imports_a_package_above_it():
    assert upward_imports() == []


@pytest.mark.parametrize(("source", "expected"), [("from contrastext.runs import stages", "runs")])
def test_the_checker_sees_imports(tmp_path, source, expected):
    """The checker itself: a relative and an absolute import are both resolved."""
    assert package_of("contrastext.runs.stages") == expected
    assert package_of("torch") is None
    relative = imports_of(PACKAGE / "runs" / "registry.py")
    assert any(module.startswith("contrastext.training") for _, module in relative)
