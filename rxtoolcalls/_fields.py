r"""Field events: each value of a call's arguments, the moment it is complete, in linear time.

One ``FieldScanner`` per call reads the argument text as it streams: a whole token (with the
``:`` or ``,`` after it) by one regular expression match, a long string's contents in bulk,
never a Python step per character. A short token a fragment cuts off (at most ``_CARRY``
characters) is read again, whole, with the next fragment; a longer one is read as it streams,
so a fragment's work stays bounded by its size. Rules:

1. A value is complete, and reported with its path, when nothing later can change it: a string
   at its closing quote, a number once a delimiter (whitespace, ``,``, ``]``, ``}``) follows,
   ``true``, ``false`` and ``null`` when the word is whole, an object or array at its closing
   bracket.
2. The order is completion order: members and items in document order, each before its
   container, the root ``()`` last.
3. Each value is what the final parse gives at its path: strings, numbers and keys are decoded
   by the same decoder as the close (``_close`` rule 4), and a container holds the very values
   reported for its members. A repeated key is reported each time its value completes; its
   object keeps the last, as the final parse does.
4. Text that is not the start of a valid JSON object, or nests deeper than ``Limits.max_depth``
   (or half the interpreter's recursion limit, past which the close's parser may refuse it),
   stops the scan: nothing more is reported for that call, and its state is let go. The close
   gives the turn's typed error; what was reported before equals the valid prefix's values.
5. With ``strings``, a string value's decoded characters are also reported as they arrive, one
   piece per fragment (never empty). Only a cut escape, or the first half of a surrogate pair,
   waits for the next fragment.
6. Arguments set by path (``_paths``) are reported as they are set: a string when its last
   fragment says no more, any other value at once, and the containers when the call closes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from json import decoder
from typing import TYPE_CHECKING, Any, TypeAlias

from ._close import _OPEN_NUMBER, _STRICT
from ._types import new_field, new_text

if TYPE_CHECKING:
    from ._core import Call

__all__ = ["CallFields", "FieldPath", "FieldScanner", "OnField", "OnText", "watch_fields"]

FieldPath: TypeAlias = tuple[str | int, ...]
OnField: TypeAlias = Callable[[FieldPath, Any], None]
OnText: TypeAlias = Callable[[FieldPath, str], None]

_SPACE = re.compile(r"[ \t\n\r]*+")
# A whole token: a string with no escape (and the ':' after a key), a number a delimiter ends,
# a word, or punctuation; then the ',' after it, if any.
_TOKEN = re.compile(
    r"""[ \t\n\r]*+
    (?:"([^"\\\x00-\x1f]*+(?:\\.[^"\\\x00-\x1f]*+)*+)"(?:[ \t\n\r]*+(:))?
      |(-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][-+]?[0-9]++)?)(?=[ \t\n\r,\]}])
      |(true|false|null)
      |([{}\[\]:,]))
    (?:[ \t\n\r]*+(,))?""",
    re.VERBOSE,
)
# The longest token text held back for the next fragment, to be read whole; a longer one is
# read as it streams (bounded: a fragment's work stays bounded by its size).
_CARRY = 256
# A string's contents up to its closing quote, escapes skipped whole; it stops short at a
# backslash that ends the fragment.
_STRING_BODY = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
# What can be decoded already: escapes whole, a cut one left for the next fragment.
_DECODABLE = re.compile(r'(?:[^\\]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+')
# The start of an escape that the next fragment completes; anything else held back is no escape.
_CUT_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?")
_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
_NUMBER = re.compile(r"[-+.eE0-9]*+")
# What may follow a number (the end of its container, the next member, whitespace).
_DELIMITERS = frozenset(" \t\n\r,]}")
_WORDS = {"t": "true", "f": "false", "n": "null"}
_WORD_VALUES: dict[str, object] = {"true": True, "false": False, "null": None}

# The decoder's string scanner (C where CPython has it), strict like the close's decoder.
_scanstring: Callable[[str, int, bool], tuple[str, int]] = decoder.scanstring  # type: ignore[attr-defined]

# States, as small ints: the scan loop compares them on every token.
_VALUE = 0  # a value must come (after ':' or ',' in an array)
_FIRST_VALUE = 1  # after '[': a value or ']'
_KEY = 2  # after ',' in an object: a key
_FIRST_KEY = 3  # after '{': a key or '}'
_COLON = 4
_AFTER = 5  # after a value: ',' or the container's close
_STRING = 6
_KEY_STRING = 7
_NUMBER_TOKEN = 8
_WORD = 9
_DONE = 10  # the root closed: whitespace only
_DEAD = 11
_START = 12  # nothing yet: the root object must open


def _decode(raw: str) -> str:
    """The characters of a string's raw contents (escapes whole); ``ValueError`` if not JSON."""
    return _scanstring(raw + '"', 0, True)[0]


def _ends_in_high_surrogate(raw: str) -> bool:
    """Whether ``raw`` (escapes whole) ends in the escape of a pair's first half."""
    if len(raw) < 6 or _HIGH_SURROGATE.fullmatch(raw, len(raw) - 6) is None:
        return False
    # The backslash is an escape's own only after an even run of backslashes.
    head = raw[: len(raw) - 6]
    return (len(head) - len(head.rstrip("\\"))) % 2 == 0


class FieldScanner:
    """The incremental scan of one call's argument text (rules 1-5).

    ``feed`` each argument fragment; ``on_field(path, value)`` hears of every complete value,
    ``on_text(path, text)`` (given) of every string's new characters. Cost: linear in the
    text; a fragment's work is bounded by its size.
    """

    __slots__ = (
        "_carry",
        "_containers",
        "_escape",
        "_held",
        "_keys",
        "_max_depth",
        "_on_field",
        "_on_text",
        "_paths",
        "_raw",
        "_state",
        "_string_path",
        "_word",
    )

    def __init__(self, on_field: OnField, on_text: OnText | None, max_depth: int) -> None:
        self._on_field = on_field
        self._on_text = on_text
        # The close's parser recurses once per level, on top of the caller's stack: past half
        # the interpreter's recursion limit it may refuse the text. The cap also bounds the
        # paths, each as long as its depth.
        self._max_depth = min(max_depth, sys.getrecursionlimit() // 2)
        self._state = _START
        # One entry per open container: the value being built, its path, its pending key.
        self._containers: list[Any] = []
        self._paths: list[FieldPath] = []
        self._keys: list[str | None] = []
        # The open token's raw text (a key, a number, or a string read without ``on_text``),
        # or a string's decoded pieces (with ``on_text``).
        self._raw: list[str] = []
        # A string's raw characters not decoded yet (a cut escape, a pair's first half).
        self._held = ""
        self._escape = False  # the fragment ended in a string's backslash
        self._word = ""
        # The start of a short token the last fragment cut off, read with the next one.
        self._carry = ""
        self._string_path: FieldPath = ()

    @property
    def dead(self) -> bool:
        """Whether the scan stopped (rule 4): the text cannot be a valid object's start."""
        return self._state == _DEAD

    def tell(self, on_field: OnField, on_text: OnText | None) -> None:
        """Report to ``on_field`` and ``on_text`` from now on."""
        self._on_field = on_field
        self._on_text = on_text

    def reset(self) -> None:
        """Start over, as new: a final value replaced the text read so far."""
        self.stop()
        self._state = _START

    def stop(self) -> None:
        """Stop the scan and let its state go (rule 4)."""
        self._state = _DEAD
        self._containers = []
        self._paths = []
        self._keys = []
        self._raw = []
        self._held = ""
        self._escape = False
        self._carry = ""

    def _path(self) -> FieldPath:
        """The path of the value that comes next."""
        if not self._containers:
            return ()
        container = self._containers[-1]
        if type(container) is list:
            return (*self._paths[-1], len(container))
        return (*self._paths[-1], self._keys[-1])  # type: ignore[arg-type]

    def _complete(self, value: object, comma: bool = False) -> None:
        """Report a complete value and put it in its container; ``comma``: one follows it."""
        containers = self._containers
        if not containers:
            # Only an object opens the root (``_START``), so this is the root closing.
            self._on_field((), value)
            if comma:
                self.stop()
            else:
                self._state = _DONE
            return
        container = containers[-1]
        if type(container) is list:
            self._on_field((*self._paths[-1], len(container)), value)
            container.append(value)
            self._state = _VALUE if comma else _AFTER
        else:
            key = self._keys[-1]
            self._on_field((*self._paths[-1], key), value)  # type: ignore[arg-type]
            container[key] = value
            self._state = _KEY if comma else _AFTER

    def _open(self, container: dict[str, Any] | list[Any], state: int) -> bool:
        """Open a container; ``False`` (and the scan stops) past ``max_depth``."""
        if len(self._containers) >= self._max_depth:
            self.stop()
            return False
        path = self._path()
        self._containers.append(container)
        self._paths.append(path)
        self._keys.append(None)
        self._state = state
        return True

    def _close(self, kind: type) -> bool:
        """Close the innermost container, of ``kind``; ``False`` (and stop) if it is another."""
        containers = self._containers
        if type(containers[-1]) is not kind:
            self.stop()
            return False
        value = containers.pop()
        self._paths.pop()
        self._keys.pop()
        self._complete(value)
        return True

    def feed(self, piece: str) -> None:
        """Read one fragment of the argument text, reporting what it completes."""
        state = self._state
        if state == _DEAD or not piece:
            return
        if self._carry:
            piece = self._carry + piece
            self._carry = ""
        i, n = 0, len(piece)
        # Finish a long token the last fragment left open.
        if state == _STRING:
            # Most fragments of a long string hold no quote, and end in no cut escape.
            if (
                self._on_text is None
                and '"' not in piece
                and piece[-1:] != "\\"
                and not self._escape
            ):
                self._raw.append(piece)
                return
            i = self._string(piece, 0)
        elif state == _KEY_STRING:
            i = self._string(piece, 0)
        elif state == _NUMBER_TOKEN:
            i = self._number(piece, 0)
        elif state == _WORD:
            i = self._word_rest(piece, 0)
        token = _TOKEN.match
        while 0 <= i < n:
            # A whole token, with the ':' or ',' after it, read by one match.
            found = token(piece, i)
            if found is None:
                i = _SPACE.match(piece, i).end()  # type: ignore[union-attr]
                if i == n:
                    return
                # A short token the fragment cuts off waits for the next one, to be read
                # whole; a long one (or a string said as it comes) is read as it streams, and
                # anything else is read a step at a time (where it stops the scan).
                if n - i <= _CARRY and self._cut(piece, i):
                    self._carry = piece[i:]
                    return
                i = self._step(piece, i)
                continue
            i = found.end()
            text, colon, number, word, mark, comma = found.groups()
            state = self._state
            if mark is not None:
                if not self._punctuation(mark, state):
                    return
                if comma is not None and not self._punctuation(",", self._state):
                    return
                continue
            if text is not None and "\\" in text:
                try:
                    text = _decode(text)
                except ValueError:
                    self.stop()
                    return
            if state <= _FIRST_VALUE and colon is None:
                if text is not None:
                    if text and self._on_text is not None:
                        self._on_text(self._path(), text)
                    self._complete(text, comma is not None)
                elif number is not None:
                    try:
                        value = _number(number)
                    except ValueError:
                        self.stop()
                        return
                    self._complete(value, comma is not None)
                else:
                    self._complete(_WORD_VALUES[word], comma is not None)
            elif text is not None and _KEY <= state <= _FIRST_KEY and comma is None:
                self._keys[-1] = text
                self._state = _COLON if colon is None else _VALUE
            else:
                self.stop()
                return

    def _cut(self, piece: str, i: int) -> bool:
        """Whether the fragment ends inside a token that starts at ``i`` and may be held back."""
        c = piece[i]
        if c == '"':
            # A value string said as it comes is never held back; a string that ends in the
            # fragment (and failed ``_TOKEN``) is read a step at a time, where it is refused.
            if self._on_text is not None and self._state <= _FIRST_VALUE:
                return False
            end = _STRING_BODY.match(piece, i + 1).end()  # type: ignore[union-attr]
            return end == len(piece) or piece[end] == "\\"  # its end, or a cut escape
        if c == "-" or "0" <= c <= "9":
            return _OPEN_NUMBER.fullmatch(piece, i) is not None
        word = _WORDS.get(c)
        return word is not None and word.startswith(piece[i:])

    def _punctuation(self, c: str, state: int) -> bool:
        """Apply one of ``{}[]:,`` in ``state``; ``False`` (and the scan stops) where invalid."""
        if state == _AFTER:
            if c == ",":
                self._state = _VALUE if type(self._containers[-1]) is list else _KEY
                return True
            if c == "}":
                return self._close(dict)
            if c == "]":
                return self._close(list)
        elif state <= _FIRST_VALUE:
            if c == "{":
                return self._open({}, _FIRST_KEY)
            if c == "[":
                return self._open([], _FIRST_VALUE)
            if c == "]" and state == _FIRST_VALUE:
                return self._close(list)
        elif state == _FIRST_KEY:
            if c == "}":
                return self._close(dict)
        elif state == _COLON:
            if c == ":":
                self._state = _VALUE
                return True
        elif state == _START and c == "{":
            return self._open({}, _FIRST_KEY)
        self.stop()
        return False

    def _step(self, piece: str, i: int) -> int:
        """Read one token from ``i``, whitespace first: the position after it, or -1 (stopped)."""
        i = _SPACE.match(piece, i).end()  # type: ignore[union-attr]
        if i == len(piece):
            return i
        c = piece[i]
        state = self._state
        if c in "{}[]:,":
            return i + 1 if self._punctuation(c, state) else -1
        if state <= _FIRST_VALUE:
            if c == '"':
                return self._string_open(piece, i + 1, _STRING)
            if c in _WORDS:
                self._word = _WORDS[c]
                self._raw = []
                self._state = _WORD
                return self._word_rest(piece, i)
            if c == "-" or "0" <= c <= "9":
                self._raw = []
                self._state = _NUMBER_TOKEN
                return self._number(piece, i)
        elif state <= _FIRST_KEY and c == '"':
            return self._string_open(piece, i + 1, _KEY_STRING)
        self.stop()
        return -1

    def _string_open(self, piece: str, i: int, state: int) -> int:
        self._state = state
        self._raw = []
        self._held = ""
        if state == _STRING and self._on_text is not None:
            self._string_path = self._path()
        return self._string(piece, i)

    def _string(self, piece: str, i: int) -> int:
        """Read a string's contents from ``i``; the position after it, or ``len(piece)``."""
        raw = self._raw
        n = len(piece)
        start = i
        if self._escape:
            # The escaped character, cut from its backslash by the fragment's end.
            if i >= n:
                return n
            self._escape = False
            i += 1
        end = _STRING_BODY.match(piece, i).end()  # type: ignore[union-attr]
        closed = end < n and piece[end] == '"'
        cut = end < n and not closed  # a backslash, the fragment's last character
        if cut:
            self._escape = True
            end = n
        if self._state == _STRING and self._on_text is not None:
            return self._text(piece, start, end, closed)
        if end > start:
            raw.append(piece[start:end])
        if not closed:
            return n
        try:
            value = _decode("".join(raw))
        except ValueError:
            self.stop()
            return -1
        self._raw = []
        if self._state == _KEY_STRING:
            self._keys[-1] = value
            self._state = _COLON
        else:
            self._complete(value)
        return end + 1

    def _text(self, piece: str, start: int, end: int, closed: bool) -> int:
        """``_string`` with ``on_text``: decode what is whole now, and say it (rule 5)."""
        raw = self._held + piece[start:end]
        whole = _DECODABLE.match(raw).end()  # type: ignore[union-attr]
        if whole < len(raw) and (closed or _CUT_ESCAPE.fullmatch(raw, whole) is None):
            self.stop()  # a bad escape: the close refuses it too
            return -1
        if not closed and _ends_in_high_surrogate(raw[:whole]):
            whole -= 6
        self._held = raw[whole:]
        if whole:
            try:
                text = _decode(raw[:whole])
            except ValueError:
                self.stop()
                return -1
            self._raw.append(text)
            assert self._on_text is not None
            self._on_text(self._string_path, text)
        if not closed:
            return len(piece)
        value = "".join(self._raw)
        self._raw = []
        self._complete(value)
        return end + 1

    def _number(self, piece: str, i: int) -> int:
        end = _NUMBER.match(piece, i).end()  # type: ignore[union-attr]
        if end > i:
            self._raw.append(piece[i:end])
        if end == len(piece):
            return end
        text = "".join(self._raw)
        self._raw = []
        try:
            if piece[end] not in _DELIMITERS:
                raise ValueError(text)  # ``12x``: what follows can end no number
            value = _number(text)
        except ValueError:
            self.stop()
            return -1
        self._complete(value)
        return end

    def _word_rest(self, piece: str, i: int) -> int:
        word = self._word
        got = sum(map(len, self._raw))
        need = len(word) - got
        part = piece[i : i + need]
        if part != word[got : got + len(part)]:
            self.stop()
            return -1
        if len(part) < need:
            self._raw.append(part)
            return len(piece)
        self._raw = []
        self._complete(_WORD_VALUES[word])
        return i + need


# The decoder's own scanner (C where CPython has it), with the close's hooks for numbers.
_scan_once: Callable[[str, int], tuple[object, int]] = _STRICT.scan_once  # type: ignore[attr-defined]


def _number(text: str) -> object:
    """A number's text as the close reads it; ``ValueError`` unless it is one whole number."""
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        raise ValueError(text) from None
    if end != len(text) or type(value) not in (int, float):
        raise ValueError(text)
    return value


def _post_order(value: object, on_field: OnField) -> None:
    """Report the containers of ``value`` in completion order (rule 2), without recursion."""
    stack: list[tuple[object, FieldPath, bool]] = [(value, (), False)]
    while stack:
        item, at, expanded = stack.pop()
        if expanded:
            on_field(at, item)
        elif type(item) is dict or type(item) is list:
            stack.append((item, at, True))
            members = item.items() if type(item) is dict else enumerate(item)
            stack.extend((v, (*at, k), False) for k, v in reversed(list(members)))


class CallFields:
    """Field events of one call, from its argument text or its values set by path (rule 6).

    The core calls ``path`` and ``paths_closed`` (arguments set by path), ``replaced`` (a final
    value that replaced the fragments) and ``named`` (the call's start was announced); the
    operator that made it passes ``text`` each argument fragment. ``until_named`` holds the
    events back until ``named``, so that a call's start comes before its fields.
    """

    __slots__ = ("_held", "_on_field", "_on_text", "_scanner", "_stopped", "text")

    def __init__(
        self,
        on_field: OnField,
        on_text: OnText | None,
        max_depth: int,
        *,
        until_named: bool = False,
    ) -> None:
        self._on_field = on_field
        self._on_text = on_text
        # The events held back until the call is named, in order (``None`` once it is).
        self._held: list[tuple[bool, FieldPath, Any]] | None = [] if until_named else None
        held = self._held
        if held is not None:
            on_field = self._hold_field
            on_text = None if on_text is None else self._hold_text
        self._scanner = FieldScanner(on_field, on_text, max_depth)
        self._stopped = False
        # One fragment of the argument text: the scanner's own ``feed``, one call less each.
        self.text: Callable[[str], None] = self._scanner.feed

    def _hold_field(self, path: FieldPath, value: object) -> None:
        if self._held is None:
            self._on_field(path, value)
        else:
            self._held.append((True, path, value))

    def _hold_text(self, path: FieldPath, text: str) -> None:
        assert self._on_text is not None
        if self._held is None:
            self._on_text(path, text)
        else:
            self._held.append((False, path, text))

    def named(self) -> None:
        """The call's start was announced: what was held back follows it, in order."""
        held, self._held = self._held, None
        if held is None:
            return
        # From now on the scanner reports straight to the operator.
        self._scanner.tell(self._on_field, self._on_text)
        for is_field, path, value in held:
            if is_field:
                self._on_field(path, value)
            else:
                assert self._on_text is not None
                self._on_text(path, value)

    def path(self, steps: FieldPath, added: str, value: object, done: bool) -> None:
        """A value set at ``steps``: ``added`` characters of a string, ``value`` once ``done``."""
        if self._stopped:
            return
        # The text the close writes from the paths repeats what was reported already.
        if not self._scanner.dead:
            self._scanner.stop()
        if added and self._on_text is not None:
            self._hold_text(steps, added)
        if done:
            self._hold_field(steps, value)

    def paths_closed(self, arguments: str) -> None:
        """The call closed with ``arguments`` written from its paths: report the containers."""
        if self._stopped:
            return
        self._scanner.stop()
        try:
            value = _STRICT.decode(arguments)
        except (ValueError, RecursionError):
            return  # the close refuses it too, with the turn's error
        _post_order(value, self._hold_field)

    def replaced(self, arguments: str) -> None:
        """A final value replaced the fragments: report its fields again, from the start."""
        if self._stopped:
            return
        self._scanner.reset()
        self._scanner.feed(arguments)

    def stop(self) -> None:
        """Report nothing more (the turn failed, or a close the wire never sent may be a cut)."""
        self._stopped = True
        self._held = None
        self._scanner.stop()


def watch_fields(
    call: Call, pending: list[object], strings: bool, max_depth: int
) -> Callable[[str], None]:
    """Give ``call`` its field events, made into ``pending``; what reads its argument text."""

    # The events wait for the call's start (``until_named``); a server-run call, never
    # announced, reports none. A custom tool's input is not JSON: that is known only after
    # the call is named, so each event asks.
    def on_field(path: tuple[str | int, ...], value: object) -> None:
        if call.json:
            pending.append(
                new_field(call.index, call.id, call.name, path, value, call.choice_index)
            )

    def on_text(path: tuple[str | int, ...], text: str) -> None:
        if call.json:
            pending.append(new_text(call.index, call.id, call.name, path, text, call.choice_index))

    call.fields = CallFields(
        on_field, on_text if strings else None, max_depth, until_named=not call.announced
    )
    return call.fields.text
