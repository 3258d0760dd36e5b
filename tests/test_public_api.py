"""The public API: ``from contrastext import <name>`` for every name of ``contrastext.__all__``, imported lazily.

``import contrastext`` must stay light (no torch, no transformers: the CLI's help and tools that read
``__version__`` pay nothing); each name resolves to the object its defining module holds; a misspelt name is an
AttributeError, as for any module.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import contrastext

HEAVY = ("torch", "transformers", "numpy", "sentence_transformers", "contrastext.runs", "contrastext.models")


def test_import_contrastext_loads_no_heavy_module():
    """A fresh interpreter: after ``import contrastext`` none of the heavy modules is in sys.modules."""
    code = (
        "import sys, contrastext\n"
        f"heavy = [name for name in {HEAVY!r} if name in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"import contrastext imported: {done.stdout.strip()}"


def test_the_names_of_the_issue_are_public():
    for name in ("TextEncoder", "make_objective", "load_config", "run_recipe"):
        assert name in contrastext.__all__


@pytest.mark.parametrize("name", [name for name in contrastext.__all__ if name != "__version__"])
def test_every_public_name_resolves_to_its_module_object(name):
    value = getattr(contrastext, name)
    module = importlib.import_module(contrastext._LAZY[name])
    assert value is getattr(module, name)
    namespace: dict = {}
    exec(f"from contrastext import {name}", namespace)  # noqa: S102 - the import statement users write
    assert namespace[name] is value


def test_dir_lists_the_public_names():
    assert set(contrastext.__all__) <= set(dir(contrastext))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'TextEncodr'"):
        contrastext.TextEncodr  # noqa: B018
    with pytest.raises(ImportError):
        exec("from contrastext import TextEncodr", {})  # noqa: S102
    assert not hasattr(contrastext, "_no_such_name")


def test_the_version_is_there_without_any_import():
    assert isinstance(contrastext.__version__, str) and contrastext.__version__


def test_all_and_the_lazy_table_name_the_same_things():
    assert sorted(contrastext.__all__) == sorted(["__version__", *contrastext._LAZY])
    assert len(set(contrastext.__all__)) == len(contrastext.__all__)
