"""One registry shape for every kind of named part: objectives, views, searches, tasks, recipes.

A :class:`Registry` maps names to entries of one kind. An entry is the object itself (a class, a factory, a
:class:`~contrastext.data.tasks.Task`) or a lazy ``"package.module:attribute"`` string, imported the first time
its name is asked for (so a slow or broken module costs the other names nothing). Every registry answers with
the same shapes:

- ``names()`` (sorted), ``name in registry``, ``for name in registry``, ``len(registry)``;
- ``get(name)``: the entry, or :class:`~contrastext.errors.UnknownNameError` ``unknown <kind> 'x'; known
  <kinds>: a, b, c`` (with ``did you mean 'y'?`` when a registered name is close);
- ``make(name, **kwargs)``: the entry called with ``kwargs``; an unknown or missing keyword argument is a
  :class:`~contrastext.errors.ConfigError` naming the <kind> and listing the accepted arguments, an invalid value
  (the entry's own ``TypeError`` / ``ValueError``) a ConfigError naming the key;
- ``accepted_arguments(name)``: the keyword arguments ``make(name, ...)`` takes (the entry's signature);
- ``check(name, key, where=None)``: config validation, a ConfigError ``<where>: <key>: unknown <kind> ...``;
- ``register(name, entry, replace=False)`` / ``unregister(name)`` / ``with registry.registered(name, entry):``
  add a part at run time (a user's loss, a test's toy view); a name already taken is an error unless ``replace``.

This is the bottom layer: it imports nothing of the package but :mod:`contrastext.errors`; a lazy entry names a
module of any layer, imported only when that entry is used.

Example::

    >>> SHAPES = Registry("shape", {"square": Square, "circle": "geometry.round:Circle"})
    >>> SHAPES.names(), "square" in SHAPES
    (['circle', 'square'], True)
    >>> SHAPES.make("square", side=2.0)
    Square(side=2.0)
    >>> SHAPES.make("square", sides=2.0)
    ConfigError: shape 'square': unknown argument(s) sides; accepted: side
    >>> SHAPES.get("sqare")
    UnknownNameError: unknown shape 'sqare'; known shapes: circle, square; did you mean 'square'?
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from contrastext.errors import ConfigError, UnknownNameError

T = TypeVar("T")

LAZY_SEPARATOR = ":"


class Registry(Generic[T]):
    """Names -> entries of one ``kind`` (``"objective"``, ``"view"``, ``"search"``, ``"task"``, ``"recipe"``).

    ``entries`` maps each name to its entry or to a lazy ``"package.module:attribute"`` string. ``plural`` is the
    kind's plural in messages (default: ``kind + "s"``, ``"es"`` after s, x, ch and sh). ``normalize`` maps a name
    as given to its registered form (tasks: ``str.lower`` after stripping), for lookups and registrations alike.
    """

    def __init__(
        self,
        kind: str,
        entries: Mapping[str, T | str] | None = None,
        *,
        plural: str | None = None,
        normalize: Callable[[str], str] | None = None,
    ):
        self.kind = kind
        self.plural = plural or _plural(kind)
        self._normalize = normalize or (lambda name: name)
        self._entries: dict[str, T | str] = {}
        for name, entry in (entries or {}).items():
            self.register(name, entry)

    # --- names ------------------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._key(name) in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={self.names()})"

    # --- entries ----------------------------------------------------------------------------------------------

    def get(self, name: str) -> T:
        """The entry called ``name`` (a lazy one imported now); UnknownNameError lists the known names."""
        if name not in self:
            raise UnknownNameError(self.unknown_message(name))
        key = self._key(name)
        entry = self._entries[key]
        if isinstance(entry, str):
            entry = self._entries[key] = _import_lazy(self.kind, key, entry)
        return entry

    __getitem__ = get

    def items(self) -> list[tuple[str, T]]:
        """``(name, entry)`` of every name, sorted by name (lazy entries imported)."""
        return [(name, self.get(name)) for name in self.names()]

    def values(self) -> list[T]:
        """Every entry, in the order of :meth:`names` (lazy entries imported)."""
        return [self.get(name) for name in self.names()]

    def unknown_message(self, name: object) -> str:
        """``unknown <kind> 'x'; known <kinds>: a, b, c`` and a did-you-mean when a known name is close."""
        message = f"unknown {self.kind} {name!r}; known {self.plural}: {', '.join(self.names()) or '(none)'}"
        if isinstance(name, str):
            close = difflib.get_close_matches(self._key(name), self.names(), n=1, cutoff=0.75)
            if close:
                message += f"; did you mean {close[0]!r}?"
        return message

    def check(self, name: str, key: str, where: str | None = None) -> str:
        """``name`` in its registered form if registered, else a ConfigError ``<where>: <key>: unknown <kind> 'x';
        known <kinds>: ...`` (``where``: the config file or the ``--set`` override the value came from)."""
        if name in self:
            return self._key(name)
        origin = f"{where}: " if where else ""
        raise ConfigError(f"{origin}{key}: {self.unknown_message(name)}")

    # --- building ---------------------------------------------------------------------------------------------

    def accepted_arguments(self, name: str) -> list[str]:
        """The keyword arguments ``make(name, ...)`` accepts: the entry's signature (a class's constructor)."""
        return [parameter.name for parameter in self._parameters(name) if parameter.kind not in _VARIADIC]

    def make(self, name: str, **kwargs: Any) -> Any:
        """The entry called ``name`` called with ``kwargs``; every error is a ConfigError naming the <kind>:
        unknown or missing arguments (listing the accepted ones), or an invalid value (naming the keys the entry's
        own message names, as ```key``` or as a word; all the given keys when it names none)."""
        entry = self.get(name)
        parameters = self._parameters(name)
        accepted = self.accepted_arguments(name)
        label = f"{self.kind} {name!r}"
        if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
            unknown = sorted(key for key in kwargs if key not in accepted)
            if unknown:
                raise ConfigError(
                    f"{label}: unknown argument(s) {', '.join(unknown)}; "
                    f"accepted: {', '.join(accepted) if accepted else '(none)'}"
                )
        try:
            inspect.signature(entry).bind(**kwargs)
        except TypeError as error:  # a required argument is missing
            raise ConfigError(f"{label}: {error}; accepted: {', '.join(accepted) or '(none)'}") from error
        try:
            return entry(**kwargs)
        except (TypeError, ValueError) as error:  # the entry's own checks name the bad key: "`temperature` must..."
            keys = ", ".join(_named_keys(str(error), sorted(kwargs)) or sorted(kwargs)) or "(no arguments)"
            raise ConfigError(f"{label}: invalid value for {keys}: {error}") from error

    # --- adding parts at run time -----------------------------------------------------------------------------

    def register(self, name: str, entry: T | str, *, replace: bool = False) -> None:
        """Add ``entry`` under ``name`` (a lazy ``"package.module:attribute"`` string or the object); a name already
        registered is a ValueError unless ``replace``."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a {self.kind} name must be a non-empty string, not {name!r}")
        key = self._key(name)
        if key in self._entries and not replace:
            raise ValueError(f"{self.kind} {key!r} is already registered; pass replace=True to replace it")
        if isinstance(entry, str) and not _is_lazy(entry):
            raise ValueError(
                f"{self.kind} {key!r}: a lazy entry is 'package.module:attribute', not {entry!r}"
            )
        self._entries[key] = entry

    def unregister(self, name: str) -> None:
        """Remove ``name``; UnknownNameError if it is not registered."""
        key = self._key(name)
        if key not in self._entries:
            raise UnknownNameError(self.unknown_message(name))
        del self._entries[key]

    @contextmanager
    def registered(self, name: str, entry: T | str, *, replace: bool = False) -> Iterator[None]:
        """``entry`` registered under ``name`` inside the ``with`` block; afterwards the registry is as before."""
        key = self._key(name)
        previous = self._entries.get(key, _ABSENT)
        self.register(name, entry, replace=replace)
        try:
            yield
        finally:
            if previous is _ABSENT:
                self._entries.pop(key, None)
            else:
                self._entries[key] = previous

    # --- internals --------------------------------------------------------------------------------------------

    def _key(self, name: str) -> str:
        return self._normalize(name)

    def _parameters(self, name: str) -> list[inspect.Parameter]:
        entry = self.get(name)
        if not callable(entry):
            raise TypeError(f"{self.kind} {name!r} is not built by a call; use get({name!r})")
        return list(inspect.signature(entry).parameters.values())


_ABSENT = object()
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _named_keys(message: str, keys: list[str]) -> list[str]:
    """The ``keys`` that ``message`` names: quoted as ```key``` if any is, else as a whole word."""
    quoted = [key for key in keys if f"`{key}`" in message]
    return quoted or [key for key in keys if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", message)]


def _plural(kind: str) -> str:
    return kind + ("es" if kind.endswith(("s", "x", "ch", "sh")) else "s")


def _is_lazy(entry: str) -> bool:
    module, separator, attribute = entry.partition(LAZY_SEPARATOR)
    return bool(separator and module and attribute)


def _import_lazy(kind: str, name: str, entry: str) -> Any:
    """The object a lazy ``"package.module:attribute"`` entry names (``attribute`` may be dotted)."""
    module_name, _, attribute = entry.partition(LAZY_SEPARATOR)
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ImportError(f"{kind} {name!r}: {entry} names no attribute {part!r}")
        found = getattr(found, part)
    return found
