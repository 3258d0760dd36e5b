"""The one YAML reader of the package: ``yaml.SafeLoader`` with duplicate keys refused and its size bounded.

``yaml.safe_load`` keeps the last of two equal keys (a whole ``train:`` section silently replaced), expands
nested aliases without limit (a "billion laughs" document of a few lines hangs whatever walks the result) and
recurses once per level of nesting (a 20k-deep document gives a ``RecursionError``). :func:`read_yaml` refuses
all three with a :class:`YamlLimitError` (a ``yaml.YAMLError``, so callers that already catch that keep
working) whose message names the line:

- a key that appears twice in one mapping: both lines (merge keys ``<<`` may still be overridden, as YAML says);
- nesting deeper than :data:`MAX_DEPTH` levels, counted while composing and again with aliases expanded;
- more than :data:`MAX_VALUES` values once aliases are expanded (a long scalar counts once per
  :data:`SCALAR_CHARS` characters), and an alias inside its own anchor (a cycle).

Example::

    >>> read_yaml("train: {a: 1}\\ntrain: {b: 2}\\n")
    Traceback (most recent call last):
    ...
    contrastext.runtime.yaml_reader.YamlLimitError: line 2: duplicate key 'train' (first at line 1); a key may appear once
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_DEPTH = 64
"""Most levels of nesting a YAML document may have (configs use four)."""

MAX_VALUES = 100_000
"""Most values (scalars, lists, mappings) a document may hold once its aliases are expanded."""

SCALAR_CHARS = 100
"""A scalar counts as one value more per this many characters (a long string repeated by aliases)."""

MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlLimitError(yaml.YAMLError):
    """A duplicate key, too deep a nesting or too large an alias expansion; ``line`` is 1-based (0: unknown)."""

    def __init__(self, line: int, text: str):
        super().__init__(f"line {line}: {text}" if line else text)
        self.line = line
        self.text = text


class BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses duplicate keys and bounds the nesting depth while composing."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                line = self.peek_event().start_mark.line + 1
                raise YamlLimitError(line, f"nested more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, MappingNode):
            _check_duplicates(self, node)
        return super().construct_mapping(node, deep=deep)


def _check_duplicates(loader: BoundedLoader, node: MappingNode) -> None:
    first: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == MERGE_TAG or not isinstance(key_node, ScalarNode):
            continue
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        try:
            seen = first.get(key)
        except TypeError:  # not hashable: the constructor names it
            continue
        if seen is not None:
            raise YamlLimitError(line, f"duplicate key {key!r} (first at line {seen}); a key may appear once")
        first[key] = line


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [child for pair in node.value for child in pair]
    return []


def check_expansion(root: Node) -> None:
    """Refuse a node graph that, with its aliases expanded, is too large, too deep, or has a cycle."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        line = node.start_mark.line + 1
        if done:
            on_path.discard(key)
            children = _children(node)
            size = 1 + sum(sizes[id(child)] for child in children)
            if isinstance(node, ScalarNode):
                size += len(node.value) // SCALAR_CHARS
            depth = 1 + max((depths[id(child)] for child in children), default=0)
            if size > MAX_VALUES:
                raise YamlLimitError(line, f"aliases expand to more than {MAX_VALUES:,} values (a YAML bomb?)")
            if depth > MAX_DEPTH:
                raise YamlLimitError(line, f"aliases nest more than {MAX_DEPTH} levels deep")
            sizes[key], depths[key] = size, depth
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YamlLimitError(line, "an alias refers to its own anchor (a cycle)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def read_yaml(text: str) -> Any:
    """The one document in ``text`` (None when empty), read as ``yaml.safe_load`` does within the bounds above."""
    loader = BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_expansion(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
