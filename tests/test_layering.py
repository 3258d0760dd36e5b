"""The package's layering: no module imports from a package above its own, and no two modules import each other
through any chain (docs/ARCHITECTURE.md, "Layers").

The import graph is read from the source with ``ast`` (every ``import`` / ``from ... import``, including
imports inside functions and under ``TYPE_CHECKING``), so a lazy import cannot hide an upward dependency or a
circle.
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


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """``contrastext/data/tasks.py`` -> ``contrastext.data.tasks``; a package's ``__init__.py`` -> the package."""
    parts = ["contrastext", *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    files = {module_name(path, package): path for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package_parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name in files)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package_parts[: len(package_parts) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                for alias in node.names:
                    if f"{source}.{alias.name}" in files:
                        targets.add(f"{source}.{alias.name}")
                    elif source in files:
                        targets.add(source)
        graph[module] = targets - {module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that reach each other through imports (Tarjan's strongly connected components)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(cycles)


def described_cycles(graph: dict[str, set[str]]) -> list[str]:
    """One line per circle: its files, and which of them imports which."""
    lines = []
    for cycle in import_cycles(graph):
        members = set(cycle)
        edges = ", ".join(f"{source} -> {target}" for source in cycle for target in sorted(graph[source] & members))
        files = " ".join(module.replace(".", "/") + ".py" for module in cycle)
        lines.append(f"import circle between {files}: {edges}")
    return lines


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


def test_no_modules_import_each_other():
    assert described_cycles(module_graph()) == []


def test_the_circle_checker_sees_a_circle_through_a_lazy_import(tmp_path):
    """Two files of one package, one importing the other at the top and the other importing back inside a function."""
    package = tmp_path / "contrastext"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "__init__.py").write_text("")
    (package / "models" / "encoder.py").write_text("from contrastext.models.st_format import write\n")
    (package / "models" / "st_format.py").write_text("def write():\n    from . import encoder\n")
    (package / "models" / "pooling.py").write_text("from contrastext.models import encoder\n")
    graph = module_graph(package)
    assert import_cycles(graph) == [["contrastext.models.encoder", "contrastext.models.st_format"]]
    assert described_cycles(graph) == [
        "import circle between contrastext/models/encoder.py contrastext/models/st_format.py: "
        "contrastext.models.encoder -> contrastext.models.st_format, "
        "contrastext.models.st_format -> contrastext.models.encoder"
    ]


@pytest.mark.parametrize(("source", "expected"), [("from contrastext.runs import stages", "runs")])
def test_the_checker_sees_imports(tmp_path, source, expected):
    """The checker itself: a relative and an absolute import are both resolved."""
    assert package_of("contrastext.runs.stages") == expected
    assert package_of("torch") is None
    relative = imports_of(PACKAGE / "runs" / "registry.py")
    assert any(module.startswith("contrastext.training") for _, module in relative)
