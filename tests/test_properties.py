"""Property tests: split and interleaving invariance, truncation, and the error promise.

On the Chat wire first (with interleaving and packing), then on every registered wire.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import reactivex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rxtoolcalls as rt
from rxtoolcalls.wires import names
from tests.helpers import Chunk, choice, outcome, reference, run_assemble, run_assembler, run_pipe
from tests.wire_builders import CallSpec, case, per_wire

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)
NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)


@st.composite
def turns(
    draw: st.DrawFn, dense: bool = False
) -> tuple[list[Chunk], list[tuple[int, str, str, str]], str | None]:
    """A well-formed stream with random splits, interleaving and packing, and its answer.

    Indices are random opaque keys, or 0..n-1 opened in order when ``dense``.
    """
    n = draw(st.integers(0, 4))
    if dense:
        indices = list(range(n))
    else:
        indices = sorted(draw(st.sets(st.integers(-2, 9), min_size=n, max_size=n)))
    expected: list[tuple[int, str, str, str]] = []
    per_call: list[list[dict[str, Any]]] = []
    for index in indices:
        name = draw(NAMES)
        text = json.dumps(draw(ARGUMENTS), ensure_ascii=draw(st.booleans()))
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=len(text))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        pieces = [p for p in pieces if p]
        call_id = f"call_{index}_{name}"
        first: dict[str, Any] = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        per_call.append([first] + [{"index": index, "function": {"arguments": p}} for p in pieces])
        expected.append((index, call_id, name, text))
    # Interleave: repeatedly take the next fragment of a random unfinished call.
    fragments: list[dict[str, Any]] = []
    queues = [list(q) for q in per_call]
    opened = 0
    while any(queues):
        # Dense streams also open calls in index order, as OpenAI does.
        live = [q for i, q in enumerate(queues) if q and (not dense or i <= opened)]
        picked = live[draw(st.integers(0, len(live) - 1))]
        if dense and picked is queues[opened] and len(picked) == len(per_call[opened]):
            opened = min(opened + 1, len(queues) - 1)
        fragments.append(picked.pop(0))
    prose = draw(st.one_of(st.none(), st.text(max_size=20)))
    chunks: list[Chunk] = [choice({"role": "assistant", "content": None})]
    if prose is not None:
        chunks.append(choice({"content": prose}))
    i = 0
    while i < len(fragments):
        size = draw(st.integers(1, 3))
        chunks.append(choice({"tool_calls": fragments[i : i + size]}))
        i += size
    chunks.append(choice({}, "tool_calls" if expected else "stop"))
    return chunks, expected, prose


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_any_split_interleaving_and_packing_gives_the_same_turn(
    case: tuple[list[Chunk], list[tuple[int, str, str, str]], str | None],
) -> None:
    chunks, expected, prose = case
    turn = run_assembler(chunks)
    assert [(c.index, c.id, c.name, c.arguments) for c in turn.tool_calls] == expected
    assert reference(chunks) == expected
    assert turn.content == prose
    for call in turn.tool_calls:
        assert call.parsed_arguments == json.loads(call.arguments)
    assert run_assemble(chunks) == turn
    assert run_pipe(chunks) == turn


@settings(max_examples=300, deadline=None)
@given(ARGUMENTS.filter(bool), st.data())
def test_every_truncation_is_an_error_and_emits_nothing(
    arguments: dict[str, Any], data: st.DataObject
) -> None:
    text = json.dumps(arguments, ensure_ascii=data.draw(st.booleans()))
    cut = data.draw(st.integers(1, len(text) - 1))
    reason = data.draw(st.sampled_from(["tool_calls", "stop", "length", None]))
    chunks = [
        choice(
            {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": ""}}]}
        ),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": text[:cut]}}]}),
        choice({}, reason),
    ]
    values: list[Any] = []
    errors: list[Exception] = []
    reactivex.from_iterable(chunks).pipe(rt.assemble(require_finish_reason=False)).subscribe(
        values.append, errors.append
    )
    assert values == []
    assert len(errors) == 1
    # A cut JSON text is always reported as cut, never as merely invalid.
    assert isinstance(errors[0], rt.TruncatedToolCallError)


@settings(max_examples=200, deadline=None)
@given(ARGUMENTS, st.text(min_size=1, max_size=5).filter(lambda s: s.strip() != ""))
def test_text_after_a_complete_value_is_invalid_not_truncated(
    arguments: dict[str, Any], junk: str
) -> None:
    text = json.dumps(arguments) + junk
    chunks = [
        choice(
            {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": text}}]}
        ),
        choice({}, "tool_calls"),
    ]
    with pytest.raises(rt.InvalidArgumentsError):
        run_assembler(chunks)


KEYS = st.sampled_from(
    [
        "choices",
        "index",
        "delta",
        "finish_reason",
        "tool_calls",
        "id",
        "type",
        "function",
        "name",
        "arguments",
        "content",
        "refusal",
        "reasoning",
        "reasoning_content",
        "usage",
        "error",
        "object",
        "function_call",
        "role",
    ]
)
WIRE_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "tool_calls", "stop", "{", "}", "x"]),
)
WIRE = st.recursive(
    WIRE_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(st.lists(WIRE, max_size=6))
def test_arbitrary_input_raises_only_our_errors(chunks: list[Any]) -> None:
    # outcome() catches only our errors: any other exception fails the test.
    first = outcome(run_assembler, chunks)
    if not isinstance(first, rt.AssistantTurn):
        assert issubclass(first[0], rt.ToolCallStreamError)
    # The three spellings agree on arbitrary input too.
    assert outcome(run_assemble, chunks) == first
    assert outcome(run_pipe, chunks) == first
    progress_errors: list[Exception] = []
    reactivex.from_iterable(chunks).pipe(rt.progress()).subscribe(on_error=progress_errors.append)
    assert all(isinstance(e, rt.ToolCallStreamError) for e in progress_errors)


# -- classification of a failed parse: cut (truncated) or wrong (invalid) ---------------------


class _Cut(Exception):
    """The reference reached the end of the text inside a value."""


class _CutInString(_Cut):
    """The text ended inside a string (where whitespace is content)."""


class _Wrong(Exception):
    """The reference met a character no JSON text could have there."""


def _prefix_reference(text: str) -> bool:
    """Whether ``text`` starts some valid JSON text, trailing whitespace outside strings aside."""
    if _starts_json(text) is not False:
        return True
    return _starts_json(text.rstrip()) is True


def _starts_json(t: str) -> bool | None:
    """True if ``t`` is cut outside a string, None inside one, False if no JSON starts so."""
    n = len(t)
    digits = "0123456789"

    def ws(i: int) -> int:
        while i < n and t[i] in " \t\n\r":
            i += 1
        if i == n:
            raise _Cut
        return i

    def string(i: int) -> int:
        i += 1
        while True:
            if i == n:
                raise _CutInString
            c = t[i]
            if c == '"':
                return i + 1
            if c == "\\":
                if i + 1 == n:
                    raise _CutInString
                if t[i + 1] in '"\\/bfnrt':
                    i += 2
                elif t[i + 1] == "u":
                    hex_digits = t[i + 2 : i + 6]
                    if not all(h in "0123456789abcdefABCDEF" for h in hex_digits):
                        raise _Wrong
                    if len(hex_digits) < 4:
                        raise _CutInString
                    i += 6
                else:
                    raise _Wrong
            elif ord(c) < 0x20:
                raise _Wrong
            else:
                i += 1

    def run(i: int) -> int:
        if i == n:
            raise _Cut
        if t[i] not in digits:
            raise _Wrong
        while i < n and t[i] in digits:
            i += 1
        return i

    def number(i: int) -> int:
        if t[i] == "-":
            i += 1
        if i == n:
            raise _Cut
        if t[i] == "0":
            i += 1
        else:
            i = run(i)
        if i < n and t[i] == ".":
            i = run(i + 1)
        if i < n and t[i] in "eE":
            i += 1
            if i < n and t[i] in "+-":
                i += 1
            i = run(i)
        return i

    def value(i: int) -> int:
        i = ws(i)
        c = t[i]
        if c == "{":
            return members(i, "}", True)
        if c == "[":
            return members(i, "]", False)
        if c == '"':
            return string(i)
        if c == "-" or c in digits:
            return number(i)
        for literal in ("true", "false", "null"):
            if t[i : i + len(literal)] == literal:
                return i + len(literal)
            if literal.startswith(t[i:]):
                raise _Cut
        raise _Wrong

    def members(i: int, close: str, keyed: bool) -> int:
        i = ws(i + 1)
        if t[i] == close:
            return i + 1
        while True:
            if keyed:
                i = ws(i)
                if t[i] != '"':
                    raise _Wrong
                i = ws(string(i))
                if t[i] != ":":
                    raise _Wrong
                i += 1
            i = ws(value(i))
            if t[i] == close:
                return i + 1
            if t[i] != ",":
                raise _Wrong
            i += 1

    try:
        end = value(0)
    except _CutInString:
        return None
    except _Cut:
        return True
    except _Wrong:
        return False
    return end == n  # a complete text, or text after it (invalid)


DIGITS = st.integers(1, 3_000).map(lambda k: "1" * k)
LONG_SCALARS = st.one_of(
    DIGITS.map(lambda d: "0." + d),
    DIGITS.map(lambda d: "-1." + d),
    DIGITS.map(lambda d: "1e-" + d[:300]),  # underflows to 0.0 (an overflow is refused)
    st.tuples(DIGITS, st.sampled_from(["e", "E-", "e+"]), DIGITS).map(
        lambda p: f"2.{p[0]}{p[1]}{p[2][:2]}"
    ),
    DIGITS.map(lambda d: json.dumps("a" * len(d))),
    st.text(max_size=40).map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.text(max_size=10).map(json.dumps),
    st.sampled_from(["true", "false", "null", "0", "-0", "12", "[1, 2.5e3]", "{}"]),
)
LONG_OBJECTS = st.lists(st.tuples(st.text(max_size=4), LONG_SCALARS), min_size=1, max_size=3).map(
    lambda members: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in members) + "}"
)
# What a broken or cut stream may leave at the end: number, escape and structural characters.
JUNK = st.text(alphabet='x.eE+-019},]:"\\u a\t', max_size=3)


def _classified_truncated(text: str) -> bool | None:
    """What the assembler says of ``text``: truncated, invalid, or None when it parses."""
    from rxtoolcalls._close import _STRICT, _ends_inside_value

    try:
        _STRICT.decode(text)
    except json.JSONDecodeError as exc:
        return _ends_inside_value(text, exc)
    except ValueError:
        return False
    return None


@settings(max_examples=400, deadline=None)
@given(LONG_OBJECTS, st.data())
def test_a_cut_long_number_exponent_or_string_is_truncated(text: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(1, len(text) - 1))
    assert json.loads(text)  # the generator builds valid objects
    assert _classified_truncated(text[:cut]) is True


@settings(max_examples=600, deadline=None)
@given(LONG_OBJECTS, st.data(), JUNK)
def test_truncated_or_invalid_agrees_with_a_plain_reader(
    text: str, data: st.DataObject, junk: str
) -> None:
    cut = data.draw(st.integers(1, len(text)))
    broken = text[:cut] + junk
    verdict = _classified_truncated(broken)
    if verdict is not None:
        assert verdict == _prefix_reference(broken), broken[-60:]


def _greedy_reference(text: str, exc: json.JSONDecodeError) -> bool:
    """The classification as first written (greedy regex, quadratic on long digit runs)."""
    import re

    open_number = re.compile(r"-?\d*\.?\d*(?:[eE][-+]?\d*)?", re.ASCII)
    msg, pos = exc.msg, exc.pos
    if msg.startswith("Unterminated string"):
        return True
    if msg.startswith("Invalid \\uXXXX escape"):
        return len(text) - pos < 6
    if msg == "Extra data":
        return False
    tail = text[pos:].rstrip()
    if not tail:
        return True
    if msg == "Expecting value":
        if any(literal.startswith(tail) for literal in ("true", "false", "null")):
            return True
        return tail[0] in "-0123456789" and open_number.fullmatch(tail) is not None
    start = pos
    while start > 0 and text[start - 1] in "-0123456789":
        start -= 1
    return start < pos and open_number.fullmatch(text[start:].rstrip()) is not None


@settings(max_examples=400, deadline=None)
@given(LONG_OBJECTS, st.data(), st.text(alphabet="x}],: a", max_size=2))
def test_short_inputs_are_classified_as_the_first_regex_did(
    text: str, data: st.DataObject, junk: str
) -> None:
    # Junk that cannot extend a number or an escape: where the first regex was right.
    cut = data.draw(st.integers(1, min(len(text), 80)))
    broken = text[:cut] + junk
    failure: json.JSONDecodeError | None = None
    try:
        json.loads(broken)
    except json.JSONDecodeError as exc:
        failure = exc
    except ValueError:
        pass
    # The first regex took any short \u escape for a cut one ("\\u:" too).
    if failure is not None and not failure.msg.startswith("Invalid \\uXXXX"):
        assert _classified_truncated(broken) == _greedy_reference(broken, failure)


@pytest.mark.parametrize(
    ("text", "truncated"),
    [
        ('{"a": 01', False),  # a leading zero is never followed by a digit
        ('{"a": 1.5.', False),  # a second decimal point
        ('{"a": 1.e', False),  # a point needs a digit before the exponent
        ('{"a": "\\u1x', False),  # not a hex digit
        ('{"a": 1\u0661', False),  # an Arabic-Indic digit is not a JSON digit
        ('{"a": "x\t', False),  # a raw tab inside a string (strict JSON refuses it)
        ('{"a": 1.', True),
        ('{"a": -', True),
        ('{"a": 1.5e+', True),
        ('{"a": "\\ud83d\\ude0', True),
        ('{"a": fals', True),
    ],
)
def test_where_the_first_regex_was_wrong(text: str, truncated: bool) -> None:
    assert _classified_truncated(text) is truncated
    assert _prefix_reference(text) is truncated


# -- every wire: the properties above on each registered wire's own events -------------------
# The streams come from the per-wire table (tests/wire_builders.py); each wire has its own
# budget, so a new wire adds its share of the time and takes nothing from the others.

PER_WIRE = 40


@st.composite
def wire_turns(
    draw: st.DrawFn, wire: str
) -> tuple[list[Any], list[tuple[str, str, str]], str | None]:
    """A whole turn of ``wire``: prose and calls, each text split at random, and its answer."""
    calls: list[CallSpec] = []
    expected: list[tuple[str, str, str]] = []
    for number in range(draw(st.integers(0, 3))):
        name = draw(NAMES)
        text = json.dumps(draw(ARGUMENTS), ensure_ascii=draw(st.booleans()))
        calls.append((f"call_{number}", name, draw(split(text))))
        expected.append((f"call_{number}", name, text))
    prose = draw(st.one_of(st.none(), st.text(min_size=1, max_size=20)))
    said = [] if prose is None else draw(split(prose))
    return case(wire).turn(said, calls), expected, prose


def split(text: str) -> st.SearchStrategy[list[str]]:
    """``text`` cut at random places into non-empty pieces."""
    inner = st.sets(st.integers(1, max(1, len(text) - 1)), max_size=min(len(text), 8))
    return inner.map(
        lambda cuts: [
            text[a:b]
            for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(text)], strict=True)
            if text[a:b]
        ]
    )


@pytest.mark.parametrize("wire", names())
@settings(max_examples=PER_WIRE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_on_every_wire_any_split_gives_the_same_turn(wire: str, data: st.DataObject) -> None:
    events, expected, prose = data.draw(wire_turns(wire))
    turn = run_assembler(events)
    assert (turn.wire, turn.content) == (wire, prose)
    assert [(c.id, c.name, c.parsed_arguments) for c in turn.tool_calls] == [
        (i, name, json.loads(text)) for i, name, text in expected
    ]
    if case(wire).arguments_as_text:
        assert [c.arguments for c in turn.tool_calls] == [text for _, _, text in expected]
    assert run_assemble(events) == turn
    assert run_pipe(events) == turn


def _emits_nothing_but_one_error(events: list[Any]) -> Exception:
    values: list[Any] = []
    errors: list[Exception] = []
    reactivex.from_iterable(events).pipe(rt.assemble()).subscribe(values.append, errors.append)
    assert values == []
    assert len(errors) == 1
    return errors[0]


@pytest.mark.parametrize("wire", names())
@settings(max_examples=PER_WIRE, deadline=None)
@given(ARGUMENTS.filter(bool), st.data())
def test_on_every_wire_every_truncation_is_an_error_and_emits_nothing(
    wire: str, arguments: dict[str, Any], data: st.DataObject
) -> None:
    entry = case(wire)
    # A call cut inside a string value, then any of the ways the wire ends a turn.
    value = data.draw(st.text(max_size=12))
    for closer in entry.closers.values():
        cut = entry.cut((), "c", "f", "k", value) + closer
        assert isinstance(_emits_nothing_but_one_error(cut), rt.TruncatedToolCallError)
    if entry.arguments_as_text:
        # The JSON text cut anywhere, then the turn's end: reported as cut, never as invalid.
        text = json.dumps(arguments, ensure_ascii=data.draw(st.booleans()))
        at = data.draw(st.integers(1, len(text) - 1))
        events = entry.turn((), [("c", "f", data.draw(split(text[:at])))])
        assert isinstance(_emits_nothing_but_one_error(events), rt.TruncatedToolCallError)


@pytest.mark.parametrize(
    ("wire", "kind"), per_wire(lambda entry: ["json text"] if entry.arguments_as_text else [])
)
@settings(max_examples=PER_WIRE, deadline=None)
@given(ARGUMENTS, st.text(min_size=1, max_size=5).filter(lambda s: s.strip() != ""))
def test_on_every_wire_text_after_a_complete_value_is_invalid_not_truncated(
    wire: str, kind: str, arguments: dict[str, Any], junk: str
) -> None:
    events = case(wire).turn((), [("c", "f", [json.dumps(arguments), junk])])
    with pytest.raises(rt.InvalidArgumentsError):
        run_assembler(events)


MUTANTS = st.one_of(
    WIRE_SCALARS,
    st.sampled_from([[], {}, 1 << 70, -1, 1.5, float("nan"), b"x", "\ud800", "tool_use"]),
)


@st.composite
def mutated(draw: st.DrawFn, value: Any, depth: int = 0) -> Any:
    """``value`` with one thing changed somewhere inside: a key dropped, a value replaced."""
    if depth < 6 and isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(list(value)))
        how = draw(st.integers(0, 2))
        if how == 0:
            return {k: v for k, v in value.items() if k != key}
        replaced = draw(MUTANTS) if how == 1 else draw(mutated(value[key], depth + 1))
        return {**value, key: replaced}
    if depth < 6 and isinstance(value, list) and value and draw(st.booleans()):
        at = draw(st.integers(0, len(value) - 1))
        return [*value[:at], draw(mutated(value[at], depth + 1)), *value[at + 1 :]]
    return draw(MUTANTS)


@pytest.mark.parametrize("wire", names())
@settings(max_examples=2 * PER_WIRE, deadline=None)
@given(data=st.data())
def test_on_every_wire_a_broken_turn_raises_only_our_errors(wire: str, data: st.DataObject) -> None:
    events = case(wire).turn(["Hi"], [("call_a", "f", ['{"a": ', '"b"}']), ("call_b", "g", ["{}"])])
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(events) - 1))
        how = data.draw(st.sampled_from(["mutate", "drop", "repeat"]))
        if how == "mutate":
            events = [*events[:at], data.draw(mutated(events[at])), *events[at + 1 :]]
        elif how == "drop":
            events = events[:at] + events[at + 1 :]
        else:
            events = events[: at + 1] + events[at:]
    # outcome() catches only our errors: any other exception fails the test.
    first = outcome(run_assembler, events)
    if not isinstance(first, rt.AssistantTurn):
        assert issubclass(first[0], rt.ToolCallStreamError)
    assert outcome(run_assemble, events) == first
    assert outcome(run_pipe, events) == first
    progress_errors: list[Exception] = []
    reactivex.from_iterable(events).pipe(rt.progress()).subscribe(on_error=progress_errors.append)
    assert all(isinstance(e, rt.ToolCallStreamError) for e in progress_errors)
