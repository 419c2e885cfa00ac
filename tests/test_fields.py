"""Field events: each value the moment it is complete, never a half value, on every wire."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Sequence
from typing import Any, assert_type

import pytest
import reactivex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reactivex import Observable
from reactivex import operators as ops
from reactivex.subject import Subject

import rxtoolcalls as rt
from rxtoolcalls._fields import FieldScanner
from rxtoolcalls.wires import names
from tests.helpers import args, call_open, collect, finish
from tests.wire_builders import (
    G_CLOSE,
    a_piece,
    a_start,
    a_tool_open,
    case,
    g_arg,
    g_open,
    g_response,
    g_stop,
    r_args_done,
    r_call,
    r_completed,
    r_created,
)

Path = tuple[str | int, ...]
Event = dict[str, Any]
CallEvent = rt.ToolCallStarted | rt.ToolCallProgress | rt.ToolCallCommitted


# -- the reference: a post-order walk of json.loads, with exact types --------------------------


def typed(value: object) -> Any:
    """``value`` with its types spelled out: ``1``, ``1.0``, ``True`` and ``-0.0`` all differ."""
    if type(value) is dict:
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if type(value) is list:
        return ("list", [typed(v) for v in value])
    if type(value) is float:
        return ("float", repr(value))
    return (type(value).__name__, value)


def walk(value: object, path: Path = ()) -> list[tuple[Path, Any]]:
    """Every value in completion order: members in document order, then their container."""
    out: list[tuple[Path, Any]] = []
    if type(value) is dict:
        for k, v in value.items():
            out += walk(v, (*path, k))
    elif type(value) is list:
        for i, v in enumerate(value):
            out += walk(v, (*path, i))
    out.append((path, typed(value)))
    return out


def seen(events: Sequence[object], name: str | None = None) -> list[tuple[Path, object]]:
    """The field events (of call ``name``), as ``walk`` gives them."""
    return [
        (e.path, typed(e.value))
        for e in events
        if isinstance(e, rt.ToolCallField) and (name is None or e.name == name)
    ]


def texts(events: Sequence[object], name: str | None = None) -> dict[Path, list[str]]:
    """The text events (of call ``name``) by path, in order."""
    out: dict[Path, list[str]] = {}
    for e in events:
        if isinstance(e, rt.ToolCallText) and (name is None or e.name == name):
            out.setdefault(e.path, []).append(e.text)
    return out


# -- JSON text with random whitespace and escapes, split at random places ----------------------

_SPACE = ["", "", "", " ", "\n", "\t", "\r\n  "]
_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b"}


def _char(c: str, rnd: random.Random) -> str:
    code = ord(c)
    if c in _SHORT and rnd.random() < 0.5:
        return _SHORT[c]
    if c in '"\\' or code < 0x20 or rnd.random() < 0.15:
        if code > 0xFFFF:  # a surrogate pair, as JSON writes what UTF-16 cannot hold in one
            code -= 0x10000
            return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04X}"
        return f"\\u{code:04x}"
    if c == "/" and rnd.random() < 0.5:
        return "\\/"
    return c


def write(value: object, rnd: random.Random) -> str:
    """``value`` as JSON text, with random whitespace and escapes."""

    def ws() -> str:
        return rnd.choice(_SPACE)

    if value is None or type(value) is bool:
        return json.dumps(value)
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return repr(value)
    if type(value) is str:
        return '"' + "".join(_char(c, rnd) for c in value) + '"'
    if type(value) is list:
        inner = (ws() + "," + ws()).join(write(v, rnd) for v in value)
        return "[" + ws() + inner + ws() + "]"
    assert type(value) is dict
    members = (write(k, rnd) + ws() + ":" + ws() + write(v, rnd) for k, v in value.items())
    return "{" + ws() + (ws() + "," + ws()).join(members) + ws() + "}"


def split(text: str, rnd: random.Random, most: int = 12) -> list[str]:
    """``text`` cut at up to ``most`` random places (at least one piece)."""
    cuts = sorted(rnd.sample(range(1, len(text)), min(len(text) - 1, rnd.randint(0, most))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


_CHARS = st.characters(codec="utf-8") | st.sampled_from('"\\/\n\t\x00\x1f\u2028é😀')
_TEXT = st.text(_CHARS, max_size=12)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=16,
)
OBJECTS = st.dictionaries(_TEXT, VALUES, max_size=5)


# -- streams --------------------------------------------------------------------------------


def run(
    events: Sequence[object], operator: Callable[..., Any] = rt.fields, **kwargs: Any
) -> tuple[list[Any], list[Exception], bool]:
    return collect(reactivex.from_iterable(events).pipe(operator(**kwargs)))


def chat_interleaved(calls: Sequence[tuple[str, str, list[str]]]) -> list[Event]:
    """Chat fragments of several calls, interleaved by index, round by round."""
    events: list[Event] = [call_open(i, cid, name) for i, (cid, name, _) in enumerate(calls)]
    for round_ in range(max(len(p) for _, _, p in calls)):
        events += [args(i, p[round_]) for i, (_, _, p) in enumerate(calls) if round_ < len(p)]
    return [*events, finish("tool_calls")]


def _path_text(path: Path) -> str:
    out = "$"
    for step in path:
        if type(step) is int:
            out += f"[{step}]"
        else:
            out += "['" + str(step).replace("\\", "\\\\").replace("'", "\\'") + "']"
    return out


def gemini_streamed(name: str, value: dict[str, Any], rnd: random.Random) -> list[Event]:
    """One Gemini call streamed by path (``partialArgs``): strings in pieces, then its close."""
    events = [g_response(g_open(name))]

    def go(item: object, path: Path) -> None:
        if type(item) is dict:
            for k, v in item.items():
                go(v, (*path, k))
        elif type(item) is list:
            for i, v in enumerate(item):
                go(v, (*path, i))
        elif type(item) is str and len(item) > 1:
            parts = split(item, rnd, 3)
            for n, part in enumerate(parts):
                more = n < len(parts) - 1
                events.append(g_response(g_arg(_path_text(path), part, more=more)))
        else:
            events.append(g_response(g_arg(_path_text(path), item)))

    go(value, ())
    return [*events, g_response(G_CLOSE)]


def by_path(value: dict[str, Any]) -> list[tuple[Path, Any]]:
    """Natively streamed by path: values in document order, then containers at the close."""
    every = walk(value)
    leaves = [(p, v) for p, v in every if v[0] not in ("dict", "list")]
    return leaves + [(p, v) for p, v in every if v[0] in ("dict", "list")]


def no_empty_containers(value: object) -> bool:
    """Paths set no empty object or array (only the root may be empty)."""
    if type(value) is dict:
        return all(
            (v or type(v) not in (dict, list)) and no_empty_containers(v) for v in value.values()
        )
    if type(value) is list:
        return all((v or type(v) not in (dict, list)) and no_empty_containers(v) for v in value)
    return True


# -- the rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize("wire", names())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OBJECTS, min_size=1, max_size=3), st.randoms(use_true_random=False))
def test_fields_are_the_post_order_walk_of_the_final_parse(
    wire: str, objects: list[dict[str, Any]], rnd: random.Random
) -> None:
    """On every wire, with one to three calls: type-exact values, in completion order."""
    texts_ = [write(value, rnd) for value in objects]
    calls = [(f"call_{n}", f"f{n}", split(text, rnd)) for n, text in enumerate(texts_)]
    events = chat_interleaved(calls) if wire == "chat" else case(wire).turn((), calls)
    for strings in (False, True):
        got, errors, done = run(events, strings=strings)
        assert not errors
        assert done
        for n, text in enumerate(texts_):
            expected = walk(json.loads(text))
            assert seen(got, f"f{n}") == expected
            if strings:
                joined = {p: "".join(t) for p, t in texts(got, f"f{n}").items()}
                assert joined == {p: v[1] for p, v in expected if v[0] == "str" and v[1]}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(OBJECTS.filter(no_empty_containers), min_size=1, max_size=3),
    st.randoms(use_true_random=False),
)
def test_gemini_paths_come_natively_and_containers_at_the_close(
    objects: list[dict[str, Any]], rnd: random.Random
) -> None:
    events = [e for n, v in enumerate(objects) for e in gemini_streamed(f"f{n}", v, rnd)]
    events.append(g_stop())
    for strings in (False, True):
        got, errors, done = run(events, strings=strings)
        assert not errors
        assert done
        for n, value in enumerate(objects):
            assert seen(got, f"f{n}") == by_path(value)
            if strings:
                joined = {p: "".join(t) for p, t in texts(got, f"f{n}").items()}
                assert joined == {p: v[1] for p, v in walk(value) if v[0] == "str" and v[1]}


def test_a_gemini_string_is_complete_only_when_its_last_entry_says_no_more() -> None:
    events = [
        g_response(g_open("edit")),
        g_response(g_arg("$.path", "src/", more=True)),
        g_response(g_arg("$.path", "app.py")),
        g_response(g_arg("$.lines[0]", 3)),
        g_response(g_arg("$.opts.dry", value=True)),
        g_response(G_CLOSE),
        g_stop(),
    ]
    subject: Subject[object] = Subject()
    got: list[rt.ToolCallField | rt.ToolCallText] = []
    subject.pipe(rt.fields(strings=True)).subscribe(got.append)
    after: list[list[tuple[str, object, object]]] = []
    for event in events:
        subject.on_next(event)
        after.append(
            [
                (type(e).__name__, e.path, e.value if isinstance(e, rt.ToolCallField) else e.text)
                for e in got
            ]
        )
        got.clear()
    assert after[1] == [("ToolCallText", ("path",), "src/")]
    assert after[2] == [
        ("ToolCallText", ("path",), "app.py"),
        ("ToolCallField", ("path",), "src/app.py"),
    ]
    assert after[3] == [("ToolCallField", ("lines", 0), 3)]
    assert after[4] == [("ToolCallField", ("opts", "dry"), True)]
    root = {"path": "src/app.py", "lines": [3], "opts": {"dry": True}}
    assert after[5] == [
        ("ToolCallField", ("lines",), [3]),
        ("ToolCallField", ("opts",), {"dry": True}),
        ("ToolCallField", (), root),
    ]


def test_a_value_never_shows_before_it_is_complete() -> None:
    """Each fragment's events: a number waits for its delimiter, a string for its quote."""
    pieces = ['{"path": "a', 'pp.py", "n": 1', "2", ', "ok": tr', "ue, ", '"xs": [1', ", 2]}"]
    subject: Subject[object] = Subject()
    got: list[rt.ToolCallField] = []
    subject.pipe(rt.fields()).subscribe(got.append)
    subject.on_next(call_open(0, "c", "edit"))
    after = []
    for piece in pieces:
        subject.on_next(args(0, piece))
        after.append([(e.path, e.value) for e in got])
        got.clear()
    assert after == [
        [],
        [(("path",), "app.py")],
        [],
        [(("n",), 12)],
        [(("ok",), True)],
        [],
        [
            (("xs", 0), 1),
            (("xs", 1), 2),
            (("xs",), [1, 2]),
            ((), {"path": "app.py", "n": 12, "ok": True, "xs": [1, 2]}),
        ],
    ]


@pytest.mark.parametrize("wire", names())
def test_a_cut_at_every_position_shows_no_half_value(wire: str) -> None:
    """Every field before a cut is the full text's value at its path; the turn is an error."""
    value = {
        "path": "src/app.py",
        "n": 12.5e3,
        "ok": False,
        "none": None,
        "xs": [1, -23, {"k": "v\u00e9\\"}],
        "big": 12345678901234567890,
        "s": '😀 "q"',
    }
    text = json.dumps(value, ensure_ascii=True)
    full = {p: v for p, v in walk(json.loads(text))}
    if wire == "gemini":
        events = gemini_streamed("f", value, random.Random(7))
    else:
        events = case(wire).turn((), [("call_1", "f", list(text))], end=False)
    closers = case(wire).closers
    named = next(i for i, e in enumerate(events) if '"f"' in json.dumps(e))
    for k in range(len(events)):
        for tail in ([], *closers.values()):
            got, errors, done = run([*events[:k], *tail], rt.lifecycle, fields=True, strings=True)
            reference = full
            if done:
                # Only Gemini can close a call between two values: a whole, shorter call.
                assert wire == "gemini" or k <= named, k
                committed = [e.call for e in got if isinstance(e, rt.ToolCallCommitted)]
                reference = {
                    p: v for c in committed if c.name == "f" for p, v in walk(c.parsed_arguments)
                }
            else:
                assert len(errors) == 1
                assert isinstance(errors[0], rt.ToolCallStreamError)
            for path, shown in seen(got, "f"):
                assert reference[path] == shown, (k, path)
            for path, parts in texts(got, "f").items():
                assert full[path][1].startswith("".join(parts))


def test_strings_come_decoded_on_the_chunk_that_brought_them() -> None:
    r"""A cut escape, or a pair's first half, waits for the next fragment; no piece is empty."""
    value = 'ab\\"c😀d\u00e9\n'
    text = '{"s": "ab\\\\\\"c\\ud83d\\ude00d\\u00e9\\n"}'
    assert json.loads(text) == {"s": value}
    said: list[str] = []
    done: list[object] = []
    for cut in range(1, len(text)):
        for second in range(cut + 1, len(text)):
            said.clear()
            done.clear()
            scanner = FieldScanner(lambda p, v: done.append(v), lambda p, t: said.append(t), 128)
            for part in [text[:cut], text[cut:second], text[second:]]:
                scanner.feed(part)
            assert all(said)
            assert "".join(said) == value
            assert done == [value, {"s": value}]
    # Each fragment says its own characters, whole, unless it ends inside an escape.
    said.clear()
    scanner = FieldScanner(lambda p, v: None, lambda p, t: said.append(t), 128)
    per_fragment = []
    for part in ['{"s": "', "abc", "de", "\\u00", "e9f", '"}']:
        scanner.feed(part)
        per_fragment.append(said[:])
        said.clear()
    assert per_fragment == [[], ["abc"], ["de"], [], ["éf"], []]


def test_a_repeated_key_is_reported_each_time_and_the_object_keeps_the_last() -> None:
    events = [call_open(0, "c", "f"), args(0, '{"a": 1, "b": [], "a": 2}'), finish()]
    got, errors, done = run(events)
    assert not errors
    assert done
    assert [(e.path, e.value) for e in got] == [
        (("a",), 1),
        (("b",), []),
        (("a",), 2),
        ((), {"a": 2, "b": []}),
    ]
    assert got[-1].value == json.loads('{"a": 1, "b": [], "a": 2}')
    strict = rt.Policy(reject_duplicate_keys=True)
    got, errors, _ = run(events, policy=strict)
    assert isinstance(errors[0], rt.InvalidArgumentsError)


def test_two_merged_objects_are_never_one_value() -> None:
    """``{}{}`` (two calls sharing an index): the first root, then the turn's error."""
    events = [call_open(0, "c", "f"), args(0, '{"a": 1}'), args(0, '{"b": 2}'), finish()]
    got, errors, done = run(events)
    assert [(e.path, e.value) for e in got] == [(("a",), 1), ((), {"a": 1})]
    assert not done
    assert isinstance(errors[0], rt.InvalidArgumentsError)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 01}',
        '{"a": 1.}',
        '{"a": -}',
        '{"a": NaN}',
        '{"a": -Infinity}',
        '{"a": 1e999}',
        '{"a": tru}',
        '{"a": "\\x"}',
        '{"a": "\x01"}',
        '{"a": 1,}',
        '{"a" 1}',
        '{"a": [1}',
        "[1]",
        '"a"',
        '\ufeff{"a": 1}',
    ],
)
def test_invalid_text_stops_the_fields_and_the_turn_fails(text: str) -> None:
    events = [call_open(0, "c", "f"), *(args(0, c) for c in text), finish()]
    got, errors, done = run(events, strings=True)
    assert not done
    assert isinstance(errors[0], rt.InvalidArgumentsError)
    assert not [e for e in got if isinstance(e, rt.ToolCallField) and e.path == ()]


def test_nesting_past_max_depth_stops_the_scan_and_the_turn_fails() -> None:
    policy = rt.Policy(limits=rt.Limits(max_depth=3))
    fits = '{"a": {"b": {"c": 1}}}'
    got, errors, _ = run([call_open(0, "c", "f"), args(0, fits), finish()], policy=policy)
    assert not errors
    assert [e.path for e in got] == [("a", "b", "c"), ("a", "b"), ("a",), ()]
    deep = '{"a": {"b": {"c": [1]}}}'
    got, errors, _ = run([call_open(0, "c", "f"), args(0, deep), finish()], policy=policy)
    assert got == []
    assert isinstance(errors[0], rt.LimitExceededError)


def test_a_number_longer_than_the_call_limit_is_refused_whole() -> None:
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=1000))
    events = [
        call_open(0, "c", "f"),
        args(0, '{"a": 1, "n": '),
        *(args(0, "9" * 100) for _ in range(10)),
    ]
    got, errors, _ = run(events, policy=policy)
    assert [(e.path, e.value) for e in got] == [(("a",), 1)]
    assert isinstance(errors[0], rt.LimitExceededError)


def test_responses_done_that_differs_is_the_error_and_lenient_reports_the_final_value() -> None:
    events = [r_created(), *r_call(0, "call_1", "f", '{"a": 1, "b": 2}'), r_completed([])]
    done_at = next(i for i, e in enumerate(events) if e["type"].endswith("arguments.done"))
    events[done_at] = r_args_done(0, '{"a": 7}')
    got, errors, _ = run(events)
    assert isinstance(errors[0], rt.MalformedChunkError)
    assert [(e.path, e.value) for e in got] == [(("a",), 1), (("b",), 2), ((), {"a": 1, "b": 2})]
    got, errors, _done = run(events[: done_at + 1], policy="lenient")
    assert [(e.path, e.value) for e in got] == [
        (("a",), 1),
        (("b",), 2),
        ((), {"a": 1, "b": 2}),
        (("a",), 7),
        ((), {"a": 7}),
    ]


@pytest.mark.parametrize("wire", names())
def test_every_recording_root_field_is_the_committed_call(wire: str) -> None:
    """On each recorded turn, the root field of each call equals its ``parsed_arguments``."""
    for name in case(wire).recordings():
        events = case(wire).load(name)
        items, errors, done = run(events, rt.lifecycle, fields=True, strings=True)
        turn_errors = collect(reactivex.from_iterable(events).pipe(rt.assemble_choices()))[1]
        assert [type(e) for e in errors] == [type(e) for e in turn_errors], name
        roots = {
            (e.choice_index, e.index): e.value
            for e in items
            if isinstance(e, rt.ToolCallField) and e.path == ()
        }
        if done:
            committed = {
                (e.choice_index, e.index): e.call.parsed_arguments
                for e in items
                if isinstance(e, rt.ToolCallCommitted)
            }
            assert roots == committed, name
            # Each call's fields come after its start and before its commit.
            order = [(type(e).__name__, e.index) for e in items]
            for key in committed:
                kinds = [k for k, i in order if i == key[1]]
                assert kinds[0] == "ToolCallStarted", name
                assert kinds[-1] == "ToolCallCommitted", name


def test_lifecycle_interleaves_fields_with_its_own_events() -> None:
    events = [call_open(0, "c", "f"), *(args(0, c) for c in '{"a": 1, "b": "x"}'), finish()]
    items, errors, done = run(events, rt.lifecycle, every=4, fields=True)
    assert not errors
    assert done
    kinds = [type(e).__name__ for e in items]
    assert kinds[0] == "ToolCallStarted"
    assert kinds[-1] == "ToolCallCommitted"
    assert "ToolCallProgress" in kinds
    fields_ = [e for e in items if isinstance(e, rt.ToolCallField)]
    assert [e.path for e in fields_] == [("a",), ("b",), ()]
    # Without fields=True, lifecycle is as it was.
    plain, _, _ = run(events, rt.lifecycle, every=4)
    assert [e for e in items if not isinstance(e, rt.ToolCallField)] == plain
    # The call refuses both (the overloads take any bools, so mypy cannot).
    with pytest.raises(ValueError, match="fields=True"):
        rt.lifecycle(strings=True)
    with pytest.raises(ValueError, match="fields=True"):
        rt.lifecycle(fields=False, strings=True)


def test_the_overloads_say_which_events_come() -> None:
    """Checked by mypy (``assert_type``); at run time, that each call makes an operator."""
    assert_type(rt.lifecycle(), Callable[[Observable[object]], Observable[CallEvent]])
    assert_type(
        rt.lifecycle(fields=True),
        Callable[[Observable[object]], Observable[CallEvent | rt.ToolCallField]],
    )
    assert_type(
        rt.lifecycle(fields=True, strings=True),
        Callable[[Observable[object]], Observable[CallEvent | rt.ToolCallField | rt.ToolCallText]],
    )
    assert_type(
        rt.lifecycle(text=True),
        Callable[
            [Observable[object]],
            Observable[CallEvent | rt.ToolCallField | rt.ToolCallText | rt.TextDelta],
        ],
    )
    flag = bool(len(sys.argv))  # a bool mypy cannot narrow: the last overload takes it
    assert_type(
        rt.lifecycle(fields=flag, strings=flag, text=flag),
        Callable[
            [Observable[object]],
            Observable[CallEvent | rt.ToolCallField | rt.ToolCallText | rt.TextDelta],
        ],
    )
    assert_type(rt.fields(), Callable[[Observable[object]], Observable[rt.ToolCallField]])
    assert_type(
        rt.fields(strings=True),
        Callable[[Observable[object]], Observable[rt.ToolCallField | rt.ToolCallText]],
    )


def test_empty_source_and_source_error() -> None:
    got, errors, done = run([])
    assert got == []
    assert isinstance(errors[0], rt.StreamInterruptedError)
    boom = ConnectionResetError("reset")
    values, errors, done = collect(reactivex.throw(boom).pipe(rt.fields()))
    assert values == []
    assert not done
    assert isinstance(errors[0], rt.StreamInterruptedError)


def test_each_subscription_has_its_own_state() -> None:
    events = [call_open(0, "c", "f"), args(0, '{"a": '), args(0, "1}"), finish()]
    source = reactivex.from_iterable(events).pipe(rt.fields(), ops.to_list())
    first, second = source.run(), source.run()
    assert (
        [(e.path, e.value) for e in first]
        == [(e.path, e.value) for e in second]
        == [
            (("a",), 1),
            ((), {"a": 1}),
        ]
    )


def test_a_subscriber_that_raises_is_not_swallowed_and_dispose_reaches_the_source() -> None:
    events = [call_open(0, "c", "f"), args(0, '{"a": 1, "b": 2}'), finish()]

    def raises(_: object) -> None:
        raise KeyError("subscriber")

    with pytest.raises(KeyError):
        reactivex.from_iterable(events).pipe(rt.fields()).subscribe(raises)
    subject: Subject[object] = Subject()
    got: list[object] = []
    subscription = subject.pipe(rt.fields()).subscribe(got.append)
    subject.on_next(call_open(0, "c", "f"))
    subscription.dispose()
    assert not subject.observers
    subject.on_next(args(0, '{"a": 1}'))
    assert got == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet='{}[]":,\\ tfn0-9.eEu"\n\x01aé😀', max_size=6), max_size=12))
def test_any_text_is_read_without_an_exception(pieces: list[str]) -> None:
    """Garbage stops the scan; it never raises, and what it reports is a valid prefix's."""
    got: list[tuple[Path, object]] = []
    scanner = FieldScanner(lambda p, v: got.append((p, v)), lambda p, t: None, 8)
    for piece in pieces:
        scanner.feed(piece)
    text = "".join(pieces)
    try:
        value = json.loads(text, object_pairs_hook=_unique)
    except (ValueError, RecursionError):
        return
    if type(value) is dict:
        full = dict(walk(value))
        assert [(p, typed(v)) for p, v in got] == walk(value)
        assert all(full[p] == typed(v) for p, v in got)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({k for k, _ in pairs}) != len(pairs):
        raise ValueError("a repeated key")
    return dict(pairs)


def test_a_call_s_fields_come_after_its_start_when_the_name_comes_late() -> None:
    """A Chat call whose first fragment has its id and arguments, and its name a later one."""
    events = [call_open(0, "c", None, '{"a": 1, '), call_open(0, None, "f", '"b": 2}'), finish()]
    items, errors, done = run(events, rt.lifecycle, fields=True)
    assert not errors
    assert done
    assert [type(e).__name__ for e in items] == [
        "ToolCallStarted",
        "ToolCallField",
        "ToolCallField",
        "ToolCallField",
        "ToolCallCommitted",
    ]
    assert {e.name for e in items} == {"f"}
    got, _, _ = run(events)
    assert [(e.name, e.path) for e in got] == [("f", ("a",)), ("f", ("b",)), ("f", ())]


def test_a_string_starts_on_the_fragment_that_brought_it_after_a_key() -> None:
    fragments = ['{"path": "a.py", "content": "def f', "():", '\\n    return 1", "n": 2}']
    subject: Subject[object] = Subject()
    got: list[rt.ToolCallField | rt.ToolCallText] = []
    subject.pipe(rt.fields(strings=True)).subscribe(got.append)
    subject.on_next(call_open(0, "c", "edit"))
    said = []
    for fragment in fragments:
        subject.on_next(args(0, fragment))
        said.append([(e.path, e.text if isinstance(e, rt.ToolCallText) else e.value) for e in got])
        got.clear()
    assert said[0] == [(("path",), "a.py"), (("path",), "a.py"), (("content",), "def f")]
    assert said[1] == [(("content",), "():")]
    assert said[2][0] == (("content",), "\n    return 1")


def test_a_custom_tool_s_free_form_input_reports_no_fields() -> None:
    """A Responses custom tool's input is text, never parsed, even when it looks like JSON."""
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "sql"}
    text = '{"a": 1}'
    events = [
        r_created(),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "input": "", "status": "in_progress"},
        },
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": text[:4]},
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": text[4:]},
        {"type": "response.custom_tool_call_input.done", "output_index": 0, "input": text},
        r_completed([{**item, "input": text, "status": "completed"}]),
    ]
    items, errors, done = run(events, rt.lifecycle, fields=True, strings=True)
    assert not errors
    assert done
    assert [type(e).__name__ for e in items] == ["ToolCallStarted", "ToolCallCommitted"]


def test_empty_fragments_keep_no_state() -> None:
    """An empty fragment (every wire's fast path passes them on) changes nothing."""
    scanner = FieldScanner(lambda p, v: None, None, 128)
    scanner.feed('{"a": t')
    for _ in range(1000):
        scanner.feed("")
    assert scanner._carry == "t"
    events = [call_open(0, "c", "f"), args(0, '{"a": t'), *[args(0, "")] * 50, args(0, "rue}")]
    got, errors, done = run([*events, finish()])
    assert [(e.path, e.value) for e in got] == [(("a",), True), ((), {"a": True})]
    assert not errors
    assert done


def test_nesting_past_half_the_recursion_limit_stops_the_scan_whatever_max_depth_says() -> None:
    """The close's parser may not reach it, and the paths would grow with the depth squared."""
    policy = rt.Policy(limits=rt.Limits(max_depth=10**6))
    half = sys.getrecursionlimit() // 2
    for depth in (half - 1, half, sys.getrecursionlimit() - 20, sys.getrecursionlimit() + 10):
        text = '{"a": ' + "[" * depth + "]" * depth + "}"
        got, errors, done = run([call_open(0, "c", "f"), args(0, text), finish()], policy=policy)
        if depth < half:  # with the root: within the cap
            assert done
            assert len(got) == depth + 1
        else:
            assert got == []
        if depth > sys.getrecursionlimit():
            assert isinstance(errors[0], rt.LimitExceededError)


@pytest.mark.parametrize(
    "fragments",
    [
        ['{"a": 12x}'],
        ['{"a": 12', "x}"],
        ['{"a": 12x}', " " * 300],
        ['{"a": 12x' + " " * 300 + "}"],
        ['{"a": [0"' + "b" * 300 + '"]}'],
        ['{"a": 01, "b": 2}'],
        ['{"a": NaN, "b": 2}'],
    ],
)
def test_what_follows_a_number_must_end_it(fragments: list[str]) -> None:
    """``12x``: not a number followed by junk, whatever the fragments; nothing is reported."""
    events = [call_open(0, "c", "f"), *(args(0, f) for f in fragments), finish()]
    got, errors, done = run(events)
    assert got == []
    assert not done
    assert isinstance(errors[0], rt.InvalidArgumentsError)


def test_a_server_run_call_holds_nothing_back() -> None:
    """Never announced, it reports nothing, and its field events stop at once."""
    from rxtoolcalls._fields import CallFields
    from rxtoolcalls._reader import reader

    scanners: list[CallFields] = []

    def on_open(call: Any) -> None:
        call.fields = CallFields(lambda p, v: None, None, 128, until_named=True)
        scanners.append(call.fields)

    made = reader(on_open=on_open, wire="anthropic")
    made.feed(a_start())
    made.feed(a_tool_open(0, "srv_1", "web_search", kind="server_tool_use"))
    for _ in range(50):
        made.feed(a_piece(0, '{"q": "x"}' if _ == 0 else ""))
    assert scanners[0]._stopped
    assert scanners[0]._held is None
