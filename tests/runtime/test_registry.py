"""The one Registry shape: names, lookups and their errors, signature-checked make, lazy entries, run-time parts."""

from __future__ import annotations

import fractions

import pytest

from contrastext.errors import ConfigError, UnknownNameError
from contrastext.runtime.registry import Registry


class Square:
    """A toy part: its constructor checks its value and names the key the way the library's parts do."""

    def __init__(self, side: float = 1.0, label: str = ""):
        if side <= 0:
            raise ValueError(f"`side` must be positive, got {side}")
        self.side, self.label = side, label


class Circle:
    def __init__(self, radius: float):
        self.radius = radius


def anything(**options):
    return options


def shapes() -> Registry:
    return Registry("shape", {"square": Square, "circle": Circle})


def test_names_are_sorted_and_the_registry_behaves_like_a_set_of_names():
    registry = shapes()
    assert registry.names() == ["circle", "square"] == list(registry) == sorted(registry)
    assert "square" in registry and "triangle" not in registry and 3 not in registry and None not in registry
    assert len(registry) == 2
    assert registry.get("square") is Square is registry["square"]
    assert registry.items() == [("circle", Circle), ("square", Square)] and registry.values() == [Circle, Square]


def test_unknown_name_lists_the_known_ones_and_suggests_a_close_one():
    with pytest.raises(UnknownNameError) as error:
        shapes().get("sqare")
    assert str(error.value) == "unknown shape 'sqare'; known shapes: circle, square; did you mean 'square'?"
    with pytest.raises(UnknownNameError) as error:
        shapes().get("hexagon")
    assert str(error.value) == "unknown shape 'hexagon'; known shapes: circle, square"  # nothing close: no guess
    assert isinstance(error.value, KeyError)  # dict-style callers catching KeyError keep working


def test_the_plural_of_the_kind_reads_as_english():
    assert "known searches: exact" in Registry("search", {"exact": Square}).unknown_message("annoy")
    assert "known recipes: gd" in Registry("recipe", {"gd": Square}).unknown_message("sgd")
    assert Registry("datum", plural="data").plural == "data"


def test_make_calls_the_entry_with_its_arguments():
    square = shapes().make("square", side=2.0, label="a")
    assert isinstance(square, Square) and (square.side, square.label) == (2.0, "a")
    assert shapes().accepted_arguments("square") == ["side", "label"]


def test_unknown_argument_names_the_kind_and_lists_the_accepted_ones():
    with pytest.raises(ConfigError) as error:
        shapes().make("square", sides=2.0, colour="red")
    assert str(error.value) == "shape 'square': unknown argument(s) colour, sides; accepted: side, label"
    empty = Registry("view", {"identity": lambda: "same"})
    with pytest.raises(ConfigError, match=r"view 'identity': unknown argument\(s\) p; accepted: \(none\)"):
        empty.make("identity", p=0.1)


def test_missing_argument_names_the_kind_and_lists_the_accepted_ones():
    with pytest.raises(ConfigError, match=r"shape 'circle': missing a required argument: 'radius'; accepted: radius"):
        shapes().make("circle")


def test_invalid_value_names_the_key_from_the_entry_message():
    with pytest.raises(ConfigError) as error:
        shapes().make("square", side=-1.0, label="a")
    assert str(error.value).startswith("shape 'square': invalid value for side: `side` must be positive")


def test_invalid_value_named_as_a_word_names_that_key_only():
    class Mask:
        def __init__(self, token_id: int, probability: float = 0.15):
            if not 0 <= probability <= 1:
                raise ValueError(f"mask probability must be in [0, 1], got {probability}")

    registry = Registry("view", {"mask": Mask})
    with pytest.raises(ConfigError, match=r"^view 'mask': invalid value for probability: mask probability must"):
        registry.make("mask", token_id=3, probability=2.0)


def test_an_entry_taking_any_keyword_accepts_every_argument():
    registry = Registry("factory", {"anything": anything})
    assert registry.make("anything", a=1, b=2) == {"a": 1, "b": 2}
    assert registry.accepted_arguments("anything") == []


def test_check_names_the_config_key_and_where_it_came_from():
    assert shapes().check("circle", "method_args.shape") == "circle"
    with pytest.raises(ConfigError) as error:
        shapes().check("sqare", "method_args.shape", where="recipe.yaml")
    assert str(error.value) == (
        "recipe.yaml: method_args.shape: unknown shape 'sqare'; known shapes: circle, square; did you mean 'square'?"
    )
    with pytest.raises(ConfigError, match=r"^method_args\.shape: unknown shape 3; known shapes"):
        shapes().check(3, "method_args.shape")


def test_lazy_entries_are_imported_on_first_use_only():
    registry = Registry("number", {"fraction": "fractions:Fraction", "missing": "contrastext_no_such_module:Thing"})
    assert registry.names() == ["fraction", "missing"] and "missing" in registry  # nothing imported yet
    assert registry.get("fraction") is fractions.Fraction
    assert registry.make("fraction", numerator=1, denominator=2) == fractions.Fraction(1, 2)
    with pytest.raises(ModuleNotFoundError, match="contrastext_no_such_module"):
        registry.get("missing")
    with pytest.raises(ImportError, match=r"number 'absent': fractions:Absent names no attribute 'Absent'"):
        Registry("number", {"absent": "fractions:Absent"}).get("absent")


def test_register_adds_a_part_and_refuses_a_taken_name_unless_replace():
    registry = shapes()
    registry.register("triangle", Circle)
    assert "triangle" in registry and registry.make("triangle", radius=1.0).radius == 1.0
    with pytest.raises(ValueError, match="shape 'triangle' is already registered; pass replace=True"):
        registry.register("triangle", Square)
    registry.register("triangle", Square, replace=True)
    assert registry.get("triangle") is Square
    registry.unregister("triangle")
    assert "triangle" not in registry
    with pytest.raises(UnknownNameError, match="unknown shape 'triangle'"):
        registry.unregister("triangle")
    with pytest.raises(ValueError, match="lazy entry is 'package.module:attribute'"):
        registry.register("hexagon", "not-a-path")
    with pytest.raises(ValueError, match="non-empty string"):
        registry.register(" ", Square)


def test_registered_is_undone_after_the_block_even_on_error():
    registry = shapes()
    with registry.registered("toy", Circle):
        assert "toy" in registry
    assert "toy" not in registry
    with pytest.raises(RuntimeError), registry.registered("square", Circle, replace=True):
        assert registry.get("square") is Circle
        raise RuntimeError
    assert registry.get("square") is Square


def test_normalize_makes_names_case_insensitive():
    registry = Registry("task", {"STSB": "x.y:z"}, normalize=lambda name: name.strip().lower())
    assert registry.names() == ["stsb"] and " StsB " in registry
    assert registry.check("STSB", "data.task") == "stsb"
    with pytest.raises(UnknownNameError, match=r"unknown task 'STSBB'; known tasks: stsb; did you mean 'stsb'\?"):
        registry.get("STSBB")


def test_an_entry_that_is_not_called_cannot_be_made():
    registry = Registry("task", {"stsb": ("a", "record")})
    assert registry.get("stsb") == ("a", "record")
    with pytest.raises(TypeError, match="task 'stsb' is not built by a call; use get"):
        registry.make("stsb")
