r"""Arguments built by setting values at JSON paths: the core's second kind of fragment.

A wire that streams arguments as values addressed by path (Gemini ``partialArgs``) sets them
here instead of appending text. Rules (``PathTree.set``):

1. A path is ``$`` followed by steps: ``.name``, ``['name']`` / ``["name"]`` (``\`` escapes
   the quote and itself), or ``[n]``. Anything else is a ``PathError``.
2. Containers are made on first use: a key step makes an object, an index step an array.
   Array elements are set in order: an index past the end (a gap) is a ``PathError``.
3. A value is set once. A string grows while its last fragment said it continues; any other
   second value at a path, a step through a value of the other container kind, or an integer
   past Python's digit limit (``sys.get_int_max_str_digits()``), is a ``PathError``.
4. ``text()`` writes the object once, at the end, as JSON text: the call's arguments, parsed
   and checked like any other.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from itertools import pairwise
from typing import Any, TypeAlias

__all__ = ["PathError", "PathTree", "Watch"]

Watch: TypeAlias = Callable[[tuple[str | int, ...], str, object, bool], None]
"""Told of each value set: its steps, a string's new characters, and the value once done."""


class PathError(ValueError):
    """A path that cannot be read, or a value that conflicts with what was set before."""

    def __init__(self, message: str, *, too_deep: bool = False) -> None:
        super().__init__(message)
        self.too_deep = too_deep


class _Text:
    """A string value still growing: its pieces, joined once when the object is written."""

    __slots__ = ("open", "pieces", "steps")

    def __init__(self, piece: str, open_: bool, steps: tuple[str | int, ...]) -> None:
        self.pieces = [piece]
        self.open = open_
        self.steps = steps


def _join(value: object) -> str:
    if isinstance(value, _Text):
        return "".join(value.pieces)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _shown(path: str) -> str:
    return repr(path if len(path) <= 80 else path[:80] + "…")


def steps(path: str) -> list[str | int]:
    """The steps of ``path``: keys as ``str``, array indexes as ``int`` (rule 1)."""
    if not path.startswith("$"):
        raise PathError(f"the path {_shown(path)} does not start with '$'")
    out: list[str | int] = []
    i, n = 1, len(path)
    while i < n:
        c = path[i]
        if c == ".":
            j = i + 1
            while j < n and path[j] not in ".[":
                j += 1
            if j == i + 1:
                raise PathError(f"the path {_shown(path)} has an empty key at character {i}")
            out.append(path[i + 1 : j])
            i = j
        elif c == "[":
            if i + 1 < n and path[i + 1] in "'\"":
                quote = path[i + 1]
                j = i + 2
                key: list[str] = []
                while j < n and path[j] != quote:
                    if path[j] == "\\" and j + 1 < n:
                        j += 1
                    key.append(path[j])
                    j += 1
                if j + 1 >= n or path[j + 1] != "]":
                    raise PathError(f"the path {_shown(path)} has an unclosed key at character {i}")
                out.append("".join(key))
                i = j + 2
            else:
                j = path.find("]", i)
                digits = path[i + 1 : j] if j > 0 else ""
                if not digits.isascii() or not digits.isdigit() or len(digits) > 18:
                    raise PathError(f"the path {_shown(path)} has a bad index at character {i}")
                if len(digits) > 1 and digits[0] == "0":
                    raise PathError(f"the path {_shown(path)} has a bad index at character {i}")
                out.append(int(digits))
                i = j + 1
        else:
            raise PathError(f"the path {_shown(path)} has {c!r} at character {i}")
    return out


class PathTree:
    """One JSON object being built from values set at paths (rules 1-4).

    ``size`` estimates the characters of the written object, for the limits: it counts every
    value and key set, never less than a few characters per new entry. ``end`` is the size a
    wire's fast path may grow it to without a limit check (its owner's grant; none at first).
    """

    __slots__ = ("_max_depth", "end", "growing", "root", "size", "watch")

    def __init__(self, max_depth: int, watch: Watch | None = None) -> None:
        self.root: dict[str, Any] = {}
        self.size = 2
        self.end = 0
        self._max_depth = max_depth
        # The strings still growing, by path: a wire's next piece for one skips the walk.
        self.growing: dict[str, _Text] = {}
        # Told of every value set, for field events (``_fields``); a wire's fast path that
        # grows a string without ``set`` is taken only while nobody watches.
        self.watch = watch

    def set(self, path: str, value: object, grows: bool) -> int:
        """Set ``value`` (a ``str``, number, ``bool`` or ``None``) at ``path``.

        A ``str`` appends to the string there while it grows; ``grows`` says whether this
        fragment's string continues. Returns the characters it added to ``size``.
        """
        text = self.growing.get(path)
        if text is not None and type(value) is str:
            text.pieces.append(value)
            self.size += len(value)
            if not grows:
                text.open = False
                del self.growing[path]
            if self.watch is not None:
                self._tell(text, value)
            return len(value)
        found = steps(path)
        if not found:
            raise PathError("the path '$' sets the whole object, not a value in it")
        if len(found) >= self._max_depth:
            raise PathError(f"the path {_shown(path)} nests too deep", too_deep=True)
        before = self.size
        node: Any = self.root
        for step, after in pairwise(found):
            node = self._child(node, step, {} if type(after) is str else [], path)
        self._leaf(node, tuple(found), value, grows, path)
        return self.size - before

    def _tell(self, text: _Text, added: str) -> None:
        """Tell the watcher of a string's new characters, and of the string once it is done."""
        assert self.watch is not None
        done = not text.open
        self.watch(text.steps, added, "".join(text.pieces) if done else None, done)

    def _fits(self, node: Any, step: str | int, path: str) -> bool:
        """Whether ``node`` has ``step`` already (rule 2 for arrays: no gaps)."""
        if type(step) is str:
            if type(node) is not dict:
                raise PathError(f"the path {_shown(path)} uses a key on an array")
            return step in node
        if type(node) is not list:
            raise PathError(f"the path {_shown(path)} uses an index on an object")
        assert type(step) is int
        if step > len(node):
            raise PathError(
                f"the path {_shown(path)} sets index {step} of an array of {len(node)}: "
                f"elements come in order"
            )
        return step < len(node)

    def _put(self, node: Any, step: str | int, value: object) -> None:
        if type(step) is str:
            node[step] = value
            self.size += len(step) + 4
        else:
            node.append(value)
            self.size += 1

    def _child(self, node: Any, step: str | int, empty: Any, path: str) -> Any:
        if self._fits(node, step, path):
            child = node[step]
            if type(child) is not type(empty):
                raise PathError(
                    f"the path {_shown(path)} goes through a value that is not "
                    f"{'an object' if type(empty) is dict else 'an array'}"
                )
            return child
        self._put(node, step, empty)
        self.size += 2
        return empty

    def _leaf(
        self, node: Any, found: tuple[str | int, ...], value: object, grows: bool, path: str
    ) -> None:
        step = found[-1]
        if self._fits(node, step, path):
            # An open string is in ``growing`` under the path it was first set by; another
            # spelling of that path ($.a and $['a']) reaches it here.
            held = node[step]
            if type(value) is str and isinstance(held, _Text) and held.open:
                held.pieces.append(value)
                held.open = grows
                self.size += len(value)
                if not grows:
                    self.growing = {p: t for p, t in self.growing.items() if t is not held}
                if self.watch is not None:
                    self._tell(held, value)
                return
            raise PathError(f"the path {_shown(path)} was set before: a value is set once")
        if type(value) is str:
            text = _Text(value, grows, found)
            self._put(node, step, text)
            self.size += len(value) + 2
            if grows:
                self.growing[path] = text
            if self.watch is not None:
                self._tell(text, value)
        else:
            try:
                written = 4 if value is None or type(value) is bool else len(repr(value))
            except ValueError as exc:
                # Python refuses to write an int past sys.get_int_max_str_digits() digits.
                raise PathError(
                    f"the path {_shown(path)} sets an integer of more than "
                    f"{sys.get_int_max_str_digits()} digits"
                ) from exc
            self._put(node, step, value)
            self.size += written
            if self.watch is not None:
                self.watch(found, "", value, True)

    def text(self) -> str:
        """The object as JSON text (rule 4)."""
        return json.dumps(self.root, ensure_ascii=False, allow_nan=False, default=_join)
