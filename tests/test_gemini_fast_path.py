"""The Gemini reader's fast paths give exactly what its full path gives, on any stream.

``GeminiReader.feed`` takes the usual responses (one whole call, one more piece of a streamed
string, a piece of the answer's text, the last ``STOP`` response) without the general rules,
and ``close_choices`` builds a turn of whole calls without the general close. Each is compared
here with the full path (``_fast`` off, ``Core``'s close) on the recordings, on values of them
broken at random, on random turns and on a case per rule: the same start events, the same
calls while open and after, the same end, the same turns or the same error.
"""

from __future__ import annotations

import copy
import os
from collections import defaultdict
from typing import Any

import pytest
import reactivex
from hypothesis import given, settings
from hypothesis import strategies as st

import rxtoolcalls as rt
from rxtoolcalls import _core
from rxtoolcalls._core import Core
from rxtoolcalls._reader import detect_wire, reader
from rxtoolcalls._types import CallItem
from rxtoolcalls.wires.gemini import GeminiReader
from tests.helpers import NotADict
from tests.test_wire_gemini import _JUNK, _places, _replace
from tests.wire_builders import G_CLOSE, g_arg, g_open, load_wire, wire_fixture_names

GEMINI = wire_fixture_names("gemini")


@pytest.fixture(autouse=True)
def same_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids are drawn at random: both paths draw the same here, so whole turns compare."""
    monkeypatch.setattr(os, "urandom", lambda n: bytes(range(n)))


def _error(error: rt.ToolCallStreamError) -> tuple[Any, ...]:
    return (type(error), str(error), vars(error))


def _open_calls(reader: Any) -> list[tuple[Any, ...]]:
    return [
        (c.choice_index, c.index, c.order, c.id, c.name, c.size, c.text(), c.closed, c.announced)
        for c in reader.calls()
    ]


def _turns(turns: tuple[rt.AssistantTurn, ...]) -> list[tuple[Any, ...]]:
    return [
        (
            turn,
            [(c.id, c.arguments, c.parsed_arguments, c.type, c.item_id) for c in turn.tool_calls],
            turn.usage,
            turn.normalizations,
            turn.items,
        )
        for turn in turns
    ]


def _rendering(render: Any) -> Any:
    """How a call renders: a shared function by its name, one made for it by its state."""
    if hasattr(render, "__name__"):
        return render.__name__
    held = [getattr(render, name) for name in type(render).__slots__]
    return (type(render).__name__, *(_rendering(h) if callable(h) else h for h in held))


def _end(reader: Any) -> list[tuple[Any, ...]]:
    """The stream's end as the reader tells it (a call's place in the items, by its index)."""
    return [
        (
            choice.content,
            choice.reasoning,
            choice.finish_reason,
            choice.outcome,
            [
                ("call", item.index, _rendering(item.render))
                if isinstance(item, CallItem)
                else item
                for item in choice.items
            ],
        )
        for choice in reader.end().choices
    ]


def outcome(
    events: list[Any], policy: rt.Policy, *, fast: bool, peek: int | None = None
) -> tuple[Any, ...]:
    """What a reader says of ``events``: start events, calls before the close, turns or error.

    ``peek``: the calls, and the end as it stands, are also read after that many events.
    """
    reader = GeminiReader(policy)
    if not fast:
        reader._fast = False
    started: list[Any] = []
    peeked: list[Any] = []
    try:
        for at, event in enumerate(events):
            if at == peek:
                peeked = [_open_calls(reader), _end(reader)]
            returned = reader.feed(event)
            started.append((type(returned), list(returned)))
        held = _open_calls(reader)
        turns = reader.close_choices() if fast else Core.close_choices(reader)
    except rt.ToolCallStreamError as error:
        return ("error", started, _error(error), peeked, _open_calls(reader))
    # The calls as the reader tells them after the close, too.
    return ("turns", started, held, _turns(turns), peeked, _open_calls(reader))


def through_rx(events: list[Any], policy: rt.Policy, wire: Any) -> tuple[Any, ...]:
    """The turn or error of ``assemble()``: what a pipeline sees."""
    out: list[Any] = []
    reactivex.from_iterable(events).pipe(rt.assemble(policy, wire=wire)).subscribe(
        out.append, out.append
    )
    if isinstance(out[0], rt.ToolCallStreamError):
        return ("error", _error(out[0]))
    assert isinstance(out[0], rt.AssistantTurn)
    return ("turns", _turns((out[0],)))


def assert_same(
    events: list[Any], policy: rt.Policy = rt.DEFAULT, peek: int | None = None
) -> tuple[Any, ...]:
    """Both paths, then ``assemble()`` forced to the wire and, once it shows, detecting it."""
    fast = outcome(copy.deepcopy(events), policy, fast=True, peek=peek)
    full = outcome(copy.deepcopy(events), policy, fast=False, peek=peek)
    assert fast == full
    expected = ("error", full[2]) if full[0] == "error" else ("turns", full[3])
    wires: list[Any] = ["gemini"]
    if events and detect_wire(events[0]) == "gemini":
        wires.append(None)
    for wire in wires:
        if expected[0] == "turns" and len(expected[1]) > 1:
            continue  # assemble() refuses more than one choice; both paths agreed above
        assert through_rx(copy.deepcopy(events), policy, wire) == expected
    return fast


# -- the recordings, whole and broken --------------------------------------------------------


@pytest.mark.parametrize("name", GEMINI)
def test_every_recording_reads_the_same_on_both_paths(name: str) -> None:
    assert assert_same(load_wire("gemini", name))[0] == "turns"


@pytest.mark.parametrize("name", GEMINI)
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_a_broken_value_anywhere_reads_the_same_on_both_paths(name: str, data: Any) -> None:
    events = load_wire("gemini", name)
    at = data.draw(st.integers(0, len(events) - 1))
    place = data.draw(st.sampled_from(_places(events[at])))
    events[at] = _replace(events[at], place, data.draw(_JUNK))
    assert_same(events)


# -- every rule the fast path must leave to the full path -------------------------------------


def _whole(name: Any = "f", args: Any = None, id: Any = None, **candidate: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": {"a": 1} if args is None else args}
    if id is not None:
        call["id"] = id
    return {"candidates": [{"content": {"parts": [{"functionCall": call}]}, **candidate}]}


_CALL: dict[str, Any] = {"functionCall": {"name": "f", "args": {"a": 1}}}
_STOP = {"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}]}
_SMALL = rt.Policy(
    limits=rt.Limits(max_calls=3, max_call_arguments=12, max_turn_arguments=30, max_identifier=8)
)
_VALIDATED = rt.Policy(
    tools={"f": {"type": "object", "properties": {"a": {"type": "string"}}}},
    validate_arguments=True,
)
_TEXT_LIMIT = rt.Policy(limits=rt.Limits(max_text=4))


def _text(text: Any) -> dict[str, Any]:
    return {"candidates": [{"content": {"parts": [{"text": text}]}}]}


_USAGES: list[Any] = [{"totalTokenCount": 1}, None, 3, []]
_CYCLE: dict[str, Any] = {}
_CYCLE["self"] = _CYCLE
_EDGES: list[tuple[str, list[Any], rt.Policy]] = [
    ("plain", [_whole(), _whole(id="id_1"), _STOP], rt.DEFAULT),
    ("index 1", [_whole(index=1), _STOP], rt.DEFAULT),
    ("index 1 finished", [_whole(index=1, finishReason="STOP"), _STOP], rt.DEFAULT),
    *(
        (f"index {index!r}", [_whole(index=index), _STOP], rt.DEFAULT)
        for index in (True, "0", 0.0, -1, None, 2**70)
    ),
    ("finish with the call", [_whole(finishReason="STOP")], rt.DEFAULT),
    ("max tokens with the call", [_whole(finishReason="MAX_TOKENS")], rt.DEFAULT),
    ("null finish", [_whole(finishReason=None), _STOP], rt.DEFAULT),
    ("a call after the finish", [_STOP, _whole()], rt.DEFAULT),
    ("no finish", [_whole(), _whole()], rt.DEFAULT),
    *(
        (f"usage {usage!r}", [{**_whole(), "usageMetadata": usage}, _STOP], rt.DEFAULT)
        for usage in _USAGES
    ),
    ("error", [{**_whole(), "error": {"code": 503, "message": "busy"}}, _STOP], rt.DEFAULT),
    *(
        (f"name {name!r}", [_whole(name=name), _STOP], _SMALL)
        for name in ("", "n" * 8, "n" * 9, 5, None)
    ),
    *((f"id {id!r}", [_whole(id=id), _STOP], _SMALL) for id in ("", "i" * 8, "i" * 9, 5)),
    (
        "null id",
        [
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [{"functionCall": {"name": "f", "args": {}, "id": None}}]
                        }
                    }
                ]
            },
            _STOP,
        ],
        rt.DEFAULT,
    ),
    ("max calls", [_whole(args={}) for _ in range(4)] + [_STOP], _SMALL),
    (
        "max call arguments",
        [_whole(args={"a": "x" * 4}), _whole(args={"a": "x" * 5}), _STOP],
        _SMALL,
    ),
    ("max turn arguments", [_whole(args={"a": "x" * 3}) for _ in range(3)] + [_STOP], _SMALL),
    ("declared", [_whole(name="f"), _STOP], rt.Policy(tools={"f": None})),
    ("undeclared", [_whole(name="g"), _STOP], rt.Policy(tools={"f": None})),
    (
        "a prefix, split names",
        [_whole(name="lo"), _STOP],
        rt.Policy(tools={"lookup": None}, join_split_names=True),
    ),
    (
        "will continue",
        [
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [
                                {"functionCall": {"name": "f", "args": {}, "willContinue": False}}
                            ]
                        }
                    }
                ]
            },
            _STOP,
        ],
        rt.DEFAULT,
    ),
    (
        "signed",
        [
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [
                                {
                                    "functionCall": {"name": "f", "args": {}},
                                    "thoughtSignature": "c2ln",
                                }
                            ]
                        }
                    }
                ]
            },
            _STOP,
        ],
        rt.DEFAULT,
    ),
    (
        "two parts",
        [
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [{"functionCall": {"name": "f", "args": {}}}, {"text": "x"}]
                        }
                    }
                ]
            },
            _STOP,
        ],
        rt.DEFAULT,
    ),
    *(
        (f"args {label}", [_whole(args=args), _STOP], rt.DEFAULT)
        for label, args in (
            ("tuple", ({"a": 1},)),
            ("list", [1]),
            ("int key", {1: "a", "1": "b"}),
            ("a set", {"a": {1}}),
            ("NaN", {"a": float("nan")}),
            ("a huge int", {"a": 10**5000}),
            ("a cycle", _CYCLE),
            ("a lone surrogate", {"a": "\ud800"}),
            ("a str subclass", {"a": type("S", (str,), {})("x")}),
        )
    ),
    *(
        (f"shape {label}", [{"candidates": candidates}, _STOP], rt.DEFAULT)
        for label, candidates in (
            ("candidates tuple", (_whole()["candidates"][0],)),
            ("candidate not a dict", [NotADict(_whole()["candidates"][0])]),
            ("content not a dict", [{"content": NotADict({"parts": [_CALL]})}]),
            ("parts tuple", [{"content": {"parts": (_CALL,)}}]),
            ("parts a dict", [{"content": {"parts": _CALL}}]),
            ("part not a dict", [{"content": {"parts": [NotADict(_CALL)]}}]),
            (
                "call not a dict",
                [{"content": {"parts": [{"functionCall": NotADict(_CALL["functionCall"])}]}}],
            ),
            ("name and args only", [{"content": {"parts": [_CALL]}}]),
            *(
                (
                    f"call with {key}",
                    [
                        {
                            "content": {
                                "parts": [{"functionCall": {**_CALL["functionCall"], key: value}}]
                            }
                        }
                    ],
                )
                for key, value in (
                    ("willContinue", True),
                    ("willContinue", False),
                    ("partialArgs", [{"jsonPath": "$.b", "numberValue": 2}]),
                    ("partialArgs", []),
                    ("x", 1),
                )
            ),
        )
    ),
    *(
        (f"validated {label}", [_whole(args=args), _STOP], _VALIDATED)
        for label, args in (("valid", {"a": "x"}), ("invalid", {"a": 1}))
    ),
    *(
        (f"prose {label}", events, policy)
        for label, events, policy in (
            ("pieces", [_text("Hel"), _text("lo"), _STOP], rt.DEFAULT),
            ("past max_text", [_text("Hel"), _text("lo"), _STOP], _TEXT_LIMIT),
            ("at max_text", [_text("He"), _text("ll"), _STOP], _TEXT_LIMIT),
            ("not a str", [_text("a"), _text(5), _STOP], rt.DEFAULT),
            ("a str subclass", [_text("a"), _text(type("T", (str,), {})("b")), _STOP], rt.DEFAULT),
            ("empty", [_text("a"), _text(""), _STOP], rt.DEFAULT),
            ("after the finish", [_text("a"), _STOP, _text("b")], rt.DEFAULT),
            ("first", [_text("a"), _whole(), _text("b"), _STOP], rt.DEFAULT),
            (
                "a thought",
                [
                    {"candidates": [{"content": {"parts": [{"text": "t", "thought": True}]}}]},
                    _text("a"),
                    _STOP,
                ],
                rt.DEFAULT,
            ),
        )
    ),
    ("deep", [_whole(args={"a": [[[1]]]}), _STOP], rt.Policy(limits=rt.Limits(max_depth=2))),
    (
        "strict keys",
        [_whole(args={1: "a", "1": "b"}), _STOP],
        rt.Policy(reject_duplicate_keys=True),
    ),
    (
        "with streamed calls",
        [
            _whole(),
            {"candidates": [{"content": {"parts": [g_open("g"), g_arg("$.q", "x")]}}]},
            _whole(),
            _STOP,
        ],
        rt.DEFAULT,
    ),
    (
        # Kept parts that hold a null functionCall sit between whole calls: the calls are
        # found among the parts, by their functionCall, when a streamed call follows.
        "null functionCall parts among whole calls",
        [
            _whole(),
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [
                                {"functionCall": None, "inlineData": {"data": "AA=="}},
                                {"functionCall": None, "text": "x"},
                            ]
                        }
                    }
                ]
            },
            _whole(id="id_1"),
            {"candidates": [{"content": {"parts": [g_open("g"), g_arg("$.q", "x")]}}]},
            _STOP,
        ],
        rt.DEFAULT,
    ),
    (
        "after prose",
        [
            {
                "candidates": [
                    {"content": {"parts": [{"text": "Hi", "thought": True}, {"text": "there"}]}}
                ]
            },
            _whole(),
            _STOP,
        ],
        rt.DEFAULT,
    ),
    (
        "a second candidate",
        [_whole(), _whole(index=1), _STOP, {"candidates": [{"index": 1, "finishReason": "STOP"}]}],
        rt.DEFAULT,
    ),
]


def _streamed(part: Any, **candidate: Any) -> dict[str, Any]:
    """A response of one part (in candidate 0 unless told)."""
    return {"candidates": [{"content": {"parts": [part]}, **candidate}]}


_DROP = object()
_PIECE: dict[str, Any] = {
    "functionCall": {
        "partialArgs": [{"jsonPath": "$.q", "stringValue": "yz", "willContinue": True}],
        "willContinue": True,
    }
}
_OPENED = [_streamed(g_open("f")), _streamed(g_arg("$.q", "x", more=True))]
_FINISHED: dict[str, Any] = {
    "candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}]
}
# The string's last piece and the call's close, then the finish: a stream that was not cut.
_ENDED = [_streamed(g_arg("$.q", "")), _streamed({"functionCall": {}}), _FINISHED]


class _Raising(dict[str, Any]):
    """A dict whose items cannot be read: its own code raises, not the wire's."""

    def items(self) -> Any:
        raise KeyError("its own")

    def __deepcopy__(self, memo: dict[int, Any]) -> _Raising:
        return _Raising(self.copy())


def _piece(**change: Any) -> dict[str, Any]:
    """``_PIECE`` with keys of its entry, or of its call (``call_…``), changed or dropped."""
    piece = copy.deepcopy(_PIECE)
    for key, value in change.items():
        call = key.startswith("call_")
        where = piece["functionCall"] if call else piece["functionCall"]["partialArgs"][0]
        if value is _DROP:
            del where[key.removeprefix("call_")]
        else:
            where[key.removeprefix("call_")] = value
    return piece


def _ended(**change: Any) -> dict[str, Any]:
    """``_FINISHED`` with keys of its candidate changed."""
    return {"candidates": [{**_FINISHED["candidates"][0], **change}]}


_ENTRY = {"jsonPath": "$.q", "stringValue": "s", "willContinue": True}
_STREAMED_EDGES: list[tuple[str, list[Any]]] = [
    ("pieces", [*_OPENED, _streamed(_PIECE), _streamed(_PIECE), *_ENDED]),
    *(
        (f"piece at index {index!r}", [*_OPENED, _streamed(_PIECE, index=index), *_ENDED])
        for index in (0, 1, 0.0, False, None, "0")
    ),
    ("piece with the finish", [*_OPENED, _streamed(_PIECE, finishReason="STOP")]),
    ("piece with usage", [*_OPENED, {**_streamed(_PIECE), "usageMetadata": {"n": 1}}, *_ENDED]),
    ("piece with bad usage", [*_OPENED, {**_streamed(_PIECE), "usageMetadata": 3}, *_ENDED]),
    ("piece with an error", [*_OPENED, {**_streamed(_PIECE), "error": {"code": 500}}, *_ENDED]),
    (
        "candidates tuple",
        [*_OPENED, {"candidates": (_streamed(_PIECE)["candidates"][0],)}, *_ENDED],
    ),
    ("parts tuple", [*_OPENED, {"candidates": [{"content": {"parts": (_PIECE,)}}]}, *_ENDED]),
    ("part not a dict", [*_OPENED, _streamed(NotADict(_PIECE)), *_ENDED]),
    (
        "call not a dict",
        [*_OPENED, _streamed({"functionCall": NotADict(_PIECE["functionCall"])}), *_ENDED],
    ),
    ("signed piece", [*_OPENED, _streamed({**_PIECE, "thoughtSignature": "c2ln"}), *_ENDED]),
    *(
        (f"piece {label}", [*_OPENED, _streamed(_piece(**change)), *_ENDED])
        for label, change in (
            ("last", {"willContinue": _DROP}),
            ("said last", {"willContinue": False}),
            ("another path", {"jsonPath": "$.r"}),
            ("a path not a str", {"jsonPath": ["$.q"]}),
            ("a number too", {"numberValue": 1}),
            ("a number too, last", {"willContinue": _DROP, "numberValue": 1}),
            ("an extra key, last", {"willContinue": _DROP, "x": 1}),
            ("a number instead", {"stringValue": _DROP, "numberValue": 1}),
            ("a str subclass", {"stringValue": type("S", (str,), {})("s")}),
            ("not a str", {"stringValue": 5}),
            ("an extra key", {"x": 1}),
            ("entries tuple", {"call_partialArgs": (dict(_ENTRY),)}),
            ("entry not a dict", {"call_partialArgs": [NotADict(dict(_ENTRY))]}),
            ("two entries", {"call_partialArgs": [dict(_ENTRY), dict(_ENTRY)]}),
            ("call goes on no more", {"call_willContinue": False}),
            ("call with a name", {"call_name": "g"}),
        )
    ),
    *(
        (f"a piece after the {label}", [*_OPENED, _streamed(_piece(**change)), _streamed(_PIECE)])
        for label, change in (
            ("last", {"willContinue": _DROP}),
            ("said last", {"willContinue": False}),
        )
    ),
    ("past the call limit", [*_OPENED, _streamed(_piece(stringValue="y" * 40)), *_ENDED]),
    *(
        (f"last {label}", [*_OPENED, _streamed({"functionCall": {}}), *end])
        for label, end in (
            ("usual", [_FINISHED]),
            ("with usage", [{**_FINISHED, "usageMetadata": {"n": 2}}]),
            ("with a message", [_ended(finishMessage="ok")]),
            ("with a bad message", [_ended(finishMessage=3)]),
            ("max tokens", [_ended(finishReason="MAX_TOKENS")]),
            ("reason a str subclass", [_ended(finishReason=type("R", (str,), {})("STOP"))]),
            ("with text", [_ended(content={"parts": [{"text": "hi"}]})]),
            ("signed", [_ended(content={"parts": [{"text": "", "thoughtSignature": "c2ln"}]})]),
            (
                "text a str subclass",
                [_ended(content={"parts": [{"text": type("T", (str,), {})()}]})],
            ),
            ("twice", [_FINISHED, _FINISHED]),
        )
    ),
    (
        "a path that is a str subclass",
        [*_OPENED, _streamed(_piece(jsonPath=type("P", (str,), {})("$.q")))],
    ),
    (
        "a piece after a blocked prompt",
        [*_OPENED, {"promptFeedback": {"blockReason": "SAFETY"}}, _streamed(_PIECE)],
    ),
    (
        "a defaultdict entry",
        [
            *_OPENED,
            _streamed(
                {
                    "functionCall": {
                        "partialArgs": [
                            defaultdict(lambda: True, {"jsonPath": "$.q", "stringValue": "y"})
                        ],
                        "willContinue": True,
                    }
                }
            ),
            _streamed(g_arg("$.q", "z")),
            _FINISHED,
        ],
    ),
    ("a defaultdict part", [*_OPENED, _streamed(defaultdict(dict, {"text": "hi"})), *_ENDED]),
    (
        "a defaultdict candidate",
        [
            _streamed({"text": "a"}),
            {
                "candidates": [
                    defaultdict(lambda: {"parts": [{"text": "boo"}]}, {"finishReason": "STOP"})
                ]
            },
        ],
    ),
    (
        "a defaultdict content",
        [
            _streamed({"text": "a"}),
            {
                "candidates": [
                    {"content": defaultdict(lambda: [{"text": "boo"}]), "finishReason": "STOP"}
                ]
            },
        ],
    ),
    ("args whose own code raises", [_whole(args={"a": _Raising(b=1)}), _FINISHED]),
    ("last after a whole call, twice", [_whole(), _FINISHED, _FINISHED]),
    ("last alone", [_FINISHED]),
    ("last while a call is open", [*_OPENED, _FINISHED]),
]


@pytest.mark.parametrize(
    "events", [e for _, e in _STREAMED_EDGES], ids=[n for n, _ in _STREAMED_EDGES]
)
def test_each_rule_of_pieces_and_of_the_last_response_reads_the_same_on_both_paths(
    events: list[Any],
) -> None:
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=30))
    for peek in (None, *range(len(events))):
        assert_same(events, policy, peek)
    # Reading a response never writes to it (a defaultdict would make up what it is asked).
    before = repr(events)
    reader = GeminiReader(policy, on_error=lambda _: None)
    for event in events:
        reader.feed(event)
    assert repr(events) == before


def test_parts_kept_as_sent_are_copies_of_the_caller_s() -> None:
    # A part neither text nor call is kept as sent: the turn and the reader hold their own
    # copy, so the caller changing it afterwards changes neither (the fast close and _held
    # read those parts).
    kept: dict[str, Any] = {"executableCode": {"code": "print(1)"}}
    events = [_whole(), {"candidates": [{"content": {"parts": [kept]}}]}]
    for peek in (False, True):
        reader = rt.Assembler()
        for event in events:
            reader.feed(event)
        kept["functionCall"] = {"name": "g", "args": {}}  # not the reader's any more
        if peek:
            # A streamed call after them makes the reader find its whole calls among the parts.
            reader.feed(
                {"candidates": [{"content": {"parts": [g_open("h"), {"functionCall": {}}]}}]}
            )
        reader.feed(_STOP)
        turn = reader.close()
        del kept["functionCall"]
        assert [c.name for c in turn.tool_calls] == (["f", "h"] if peek else ["f"])
        assert turn.items[1] == {"executableCode": {"code": "print(1)"}}
        assert turn.items[1] is not kept
        kept["executableCode"] = {"code": "changed"}
        assert turn.items[1] == {"executableCode": {"code": "print(1)"}}
        kept["executableCode"] = {"code": "print(1)"}


def test_an_error_of_the_arguments_own_code_is_typed_and_reported() -> None:
    events = [_whole(args={"a": _Raising(b=1)}), _FINISHED]
    reported: list[Exception] = []
    reader = GeminiReader(on_error=reported.append)
    assert [list(reader.feed(event)) for event in events] == [[], []]
    assert [type(error) for error in reported] == [rt.MalformedChunkError]
    assert isinstance(reported[0].__cause__, KeyError)
    with pytest.raises(rt.MalformedChunkError):
        GeminiReader().feed(events[0])


def test_a_reader_stopped_inside_its_own_feed_still_reports_that_event_s_error() -> None:
    reported: list[Exception] = []
    made: list[Any] = []
    stopping = reader(wire="gemini", on_open=lambda _: made[0].stop(), on_error=reported.append)
    made.append(stopping)
    broken = {
        "candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {}}}, 5]}}]
    }
    assert list(stopping.feed(broken)) == []
    assert [type(error) for error in reported] == [rt.MalformedChunkError]


@pytest.mark.parametrize(
    ("events", "policy"), [(e, p) for _, e, p in _EDGES], ids=[n for n, _, _ in _EDGES]
)
def test_each_rule_reads_the_same_on_both_paths(events: list[Any], policy: rt.Policy) -> None:
    for peek in (None, *range(len(events))):
        assert_same(events, policy, peek)


# -- random turns of whole calls -------------------------------------------------------------

_NAMES = st.sampled_from(["f", "g", "lookup", "", "n" * 30]) | st.none() | st.integers(0, 2)
_IDS = st.sampled_from(["id_1", "id_2", "", "i" * 30]) | st.none() | st.integers(0, 2)
_LEAF = st.none() | st.booleans() | st.integers(-5, 5) | st.floats() | st.text(max_size=8)
_ARGS = st.recursive(
    _LEAF | st.text(alphabet="\ud800\udc00é", max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=3) | st.integers(0, 2), inner, max_size=3)
    ),
    max_leaves=8,
)
_WHOLE_ARGS = st.dictionaries(st.text(max_size=4), _ARGS, max_size=3) | _ARGS


@st.composite
def _function_call(draw: Any) -> dict[str, Any]:
    call: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        call["name"] = draw(_NAMES)
    if draw(st.integers(0, 9)):
        call["args"] = draw(_WHOLE_ARGS)
    if draw(st.booleans()):
        call["id"] = draw(_IDS)
    if not draw(st.integers(0, 7)):
        call[draw(st.sampled_from(["willContinue", "partialArgs", "x"]))] = draw(
            st.sampled_from([True, False, None, [], [{"jsonPath": "$.a", "numberValue": 1}]])
        )
    return call


@st.composite
def _part(draw: Any) -> Any:
    kind = draw(st.integers(0, 9))
    if kind <= 5:
        part: dict[str, Any] = {"functionCall": draw(_function_call())}
    elif kind == 6:
        part = {"text": draw(st.text(max_size=4) | st.none() | st.integers(0, 1))}
        if draw(st.booleans()):
            part["thought"] = True
    elif kind == 7:
        part = g_open(draw(st.sampled_from(["f", "h"])))
    elif kind == 8:
        part = g_arg("$.q", draw(st.text(max_size=3)), more=draw(st.booleans()))
    else:
        return draw(st.sampled_from([None, "text", 3, [], {}]))
    if not draw(st.integers(0, 5)):
        part["thoughtSignature"] = draw(st.sampled_from(["c2ln", "", 3]))
    return part


@st.composite
def _response(draw: Any) -> Any:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": draw(st.lists(_part(), max_size=2))}
    }
    if not draw(st.integers(0, 9)):
        candidate["index"] = draw(st.sampled_from([0, 1, -1, True, "0", 0.0]))
    if not draw(st.integers(0, 11)):
        # Shapes that read like the usual one: a tuple, a mapping that is not a dict.
        whole = {"functionCall": {"name": "f", "args": {}}}
        candidate["content"] = draw(
            st.sampled_from(
                [
                    None,
                    [],
                    {},
                    {"parts": None},
                    {"parts": {}},
                    {"parts": (whole,)},
                    {"parts": {"functionCall": whole["functionCall"]}},
                    NotADict({"parts": [whole]}),
                    {"parts": [NotADict(whole)]},
                    {"parts": [{"functionCall": NotADict(whole["functionCall"])}]},
                ]
            )
        )
    if not draw(st.integers(0, 11)):
        candidate["finishReason"] = draw(st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", None, 3]))
    event: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
    if not draw(st.integers(0, 7)):
        event["usageMetadata"] = draw(st.sampled_from([{"totalTokenCount": 3}, None, 3, []]))
    if not draw(st.integers(0, 19)):
        event["candidates"] = draw(
            st.sampled_from(
                [[], [candidate, candidate], None, {}, (candidate,), [NotADict(candidate)]]
            )
        )
    if not draw(st.integers(0, 29)):
        event["error"] = {"code": 500, "message": "boom"}
    if not draw(st.integers(0, 29)):
        return draw(st.sampled_from([None, "[DONE]", 3, [], {"choices": []}]))
    return event


_END = st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL", None])
_POLICIES = st.sampled_from(
    [
        rt.DEFAULT,
        rt.LENIENT,
        rt.Policy(tools={"f": None, "lookup": None}),
        rt.Policy(tools={"f": None}, join_split_names=True),
        rt.Policy(
            limits=rt.Limits(
                max_calls=3, max_call_arguments=24, max_turn_arguments=40, max_identifier=20
            )
        ),
        rt.Policy(limits=rt.Limits(max_depth=2)),
        rt.Policy(reject_duplicate_keys=True),
    ]
)


@settings(max_examples=400, deadline=None)
@given(events=st.lists(_response(), max_size=6), end=_END, policy=_POLICIES)
def test_random_turns_read_the_same_on_both_paths(
    events: list[Any], end: str | None, policy: rt.Policy
) -> None:
    if end is not None:
        events.append({"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": end}]})
    assert_same(events, policy)


@settings(max_examples=200, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["f", "g", "lookup"]), _WHOLE_ARGS, st.none() | _IDS),
        min_size=1,
        max_size=9,
    ),
    usage=st.booleans(),
    policy=_POLICIES,
)
def test_random_turns_of_whole_calls_read_the_same_on_both_paths(
    calls: list[tuple[str, Any, Any]], usage: bool, policy: rt.Policy
) -> None:
    events: list[Any] = []
    for name, args, id_ in calls:
        function_call: dict[str, Any] = {"name": name, "args": args}
        if id_ is not None:
            function_call["id"] = id_
        event: dict[str, Any] = {
            "candidates": [{"content": {"parts": [{"functionCall": function_call}]}}]
        }
        if usage:
            event["usageMetadata"] = {"promptTokenCount": len(events)}
        events.append(event)
    events.append({"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}]})
    assert_same(events, policy)


def test_the_usual_turn_takes_the_fast_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons above mean something only if the fast paths run: count the full ones."""
    call: dict[str, Any] = {"functionCall": {"name": "f", "args": {"i": 0}}}
    events: list[Any] = [{"candidates": [{"content": {"parts": [call]}}]} for _ in range(4)]
    events.append({"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}]})
    full: list[Any] = []
    feed, close = GeminiReader._slow_feed, Core.close_choices

    def full_feed(self: GeminiReader, event: Any) -> Any:
        full.append(event)
        return feed(self, event)

    def full_close(self: Core) -> Any:
        full.append("close")
        return close(self)

    monkeypatch.setattr(GeminiReader, "_slow_feed", full_feed)
    monkeypatch.setattr(Core, "close_choices", full_close)
    prose = [_text("Hi, "), _text("there.")]
    reader = GeminiReader()
    for event in [*prose, *events]:
        reader.feed(event)
    (turn,) = reader.close_choices()
    assert full == prose[:1]  # the first response makes the candidate, on the full path
    assert turn.content == "Hi, there."
    assert [c.index for c in turn.tool_calls] == [0, 1, 2, 3]
    # A streamed call: its opening, its string's last piece and its closing take the full
    # path, its other pieces do not,
    # and the turn takes the full close.
    pieces = [_streamed(g_arg("$.q", "ab", more=True)) for _ in range(3)]
    streamed = [_streamed(g_open("f")), _streamed(g_arg("$.q", "x", more=True)), *pieces]
    closing = _streamed({"functionCall": {}})
    full.clear()
    reader = GeminiReader()
    last_piece = _streamed(g_arg("$.q", ""))
    for event in [*streamed, last_piece, closing, *events]:
        reader.feed(event)
    assert full == [streamed[0], streamed[1], last_piece, closing]
    reader.close_choices()
    assert full[-1] == "close"


# -- the grant: what the piece's fast path may take without checking the limits --------------


def _without_grants(
    monkeypatch: pytest.MonkeyPatch, events: list[Any], policy: rt.Policy
) -> tuple[Any, ...]:
    """The outcome when no tree is ever granted room: every piece takes the exact checks."""
    with monkeypatch.context() as patched:
        patched.setattr(_core, "_GRANT", 0)
        return outcome(copy.deepcopy(events), policy, fast=True)


@pytest.mark.parametrize("grant", [0, 1, 7, 1 << 16])
def test_pieces_meet_the_call_limit_exactly_whatever_the_grant(
    monkeypatch: pytest.MonkeyPatch, grant: int
) -> None:
    # Each count of pieces, on both sides of the limit: the same turn or the same error, and
    # the limit is met within the range (one count passes, the next fails).
    monkeypatch.setattr(_core, "_GRANT", grant)
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=40, max_turn_arguments=1000))
    kinds = []
    for count in range(25):
        events = [*_OPENED, *(_streamed(_PIECE) for _ in range(count)), *_ENDED]
        found = assert_same(events, policy)
        if found[0] == "error":
            assert found[2][2]["limit"] == "max_call_arguments"
        kinds.append(found[0])
    assert "turns" in kinds
    assert "error" in kinds
    assert kinds == sorted(kinds, key=lambda kind: kind == "error")


_BOTH_STOP = {
    "candidates": [
        {"index": index, "content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}
        for index in (0, 1)
    ]
}


def _granted(events: list[Any], policy: rt.Policy) -> tuple[tuple[Any, ...], int]:
    """The outcome on the fast path, and how many responses its pieces' fast path took."""
    full: list[Any] = []
    feed = GeminiReader._slow_feed

    def counted(self: GeminiReader, event: Any) -> Any:
        full.append(event)
        return feed(self, event)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(GeminiReader, "_slow_feed", counted)
        found = outcome(copy.deepcopy(events), policy, fast=True)
    return found, len(events) - len(full)


def test_a_grant_held_by_one_call_never_refuses_another_the_turn_s_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Candidate 0's string takes pieces on the fast path against a grant as large as the
    # turn's room; candidate 1 then sets a value on the full path. Its exact check must see
    # the room the grant has not used: with the limit met to the character, both turns come.
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=500, max_turn_arguments=60))
    results = []
    for length in range(60):
        events = [
            {
                "candidates": [
                    {"index": i, "content": {"parts": [g_open(n)]}} for i, n in ((0, "f"), (1, "g"))
                ]
            },
            _streamed(index=0, part=g_arg("$.q", "x", more=True)),
            _streamed(index=0, part=_PIECE),
            _streamed(index=0, part=_PIECE),
            _streamed(index=1, part=g_arg("$.r", "y" * length)),
            _streamed(index=0, part=_PIECE),
            _streamed(index=0, part=g_arg("$.q", "")),
            _streamed(index=0, part=G_CLOSE),
            _streamed(index=1, part=G_CLOSE),
            _BOTH_STOP,
        ]
        granted, fast = _granted(events, policy)
        assert fast >= 2  # the two pieces before candidate 1's value, at least
        assert granted == outcome(copy.deepcopy(events), policy, fast=False)
        assert granted == _without_grants(monkeypatch, events, policy)
        if granted[0] == "error":
            assert granted[2][2]["limit"] == "max_turn_arguments"
        results.append(granted[0])
    # The turn's limit is met inside the range: the longest value that fits passes.
    assert results[0] == "turns"
    assert results[-1] == "error"
    assert results == sorted(results, key=lambda kind: kind == "error")


_FRAGMENT = st.one_of(
    st.builds(lambda name: g_open(name), st.sampled_from(["f", "g"])),
    st.builds(
        lambda path, text, more: g_arg(path, text, more=more),
        st.sampled_from(["$.q", "$.r", "$.a[0]"]),
        st.text(alphabet="ab", max_size=12),
        st.booleans(),
    ),
    st.builds(lambda n: g_arg("$.n", n), st.integers(-9, 99999)),
    st.just(_PIECE),
    st.just(G_CLOSE),
)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.tuples(st.sampled_from([0, 0, 0, 1]), _FRAGMENT), max_size=14),
    max_call=st.sampled_from([12, 30, 100]),
    max_turn=st.sampled_from([20, 40, 200]),
    grant=st.sampled_from([2, 5, 1 << 16]),
)
def test_grants_change_no_outcome(
    steps: list[tuple[int, Any]], max_call: int, max_turn: int, grant: int
) -> None:
    # Both candidates open a streamed call; candidate 0's string takes a piece on the fast
    # path; then random fragments, each in a response of its candidate alone, under small
    # limits. With any grant, the turns or the error are those of the full path and of a
    # reader that grants nothing (every piece checked exactly).
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=max_call, max_turn_arguments=max_turn))
    opened = [{"index": i, "content": {"parts": [g_open(n)]}} for i, n in ((0, "f"), (1, "g"))]
    events = [
        {"candidates": opened},
        _streamed(index=0, part=g_arg("$.q", "x", more=True)),
        _streamed(index=0, part=_PIECE),
        *(_streamed(index=index, part=part) for index, part in steps),
        _BOTH_STOP,
    ]
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(_core, "_GRANT", grant)
        granted, fast = _granted(events, policy)
        assert fast >= 1
        assert granted == outcome(copy.deepcopy(events), policy, fast=False)
        patched.setattr(_core, "_GRANT", 0)
        assert granted == outcome(copy.deepcopy(events), policy, fast=True)


@pytest.mark.parametrize("end", ["STOP", "MAX_TOKENS"])
def test_the_turn_limit_counts_closed_calls_with_open_ones(end: str) -> None:
    # A call closed takes its text from the turn's budget; a call still taking values by path
    # takes from the same budget, so the piece that passes the turn's limit is refused where
    # it comes (not at the close, and whatever the end), with nothing past it kept.
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=40, max_turn_arguments=50))
    events = [
        _streamed(g_open("f")),
        _streamed(g_arg("$.q", "x" * 25)),
        _streamed(G_CLOSE),  # f's text, 34 characters, is charged here
        _streamed(g_open("g")),
        _streamed(g_arg("$.q", "y", more=True)),
        *(_streamed(g_arg("$.q", "y" * 9, more=True)) for _ in range(3)),
        _streamed(G_CLOSE),
        _ended(finishReason=end),
    ]
    found = assert_same(events, policy)
    assert found[0] == "error"
    _, started, (kind, _, fields), _, _ = found
    assert kind is rt.LimitExceededError
    assert fields["limit"] == "max_turn_arguments"
    # Refused at g's first piece of nine: 34 + 19 > 50 (its tree holds 10 before it).
    assert len(started) == 5


def test_containers_made_before_a_refused_path_are_charged() -> None:
    # A path refused for a gap leaves the containers it made on the way in the tree; a caller
    # who feeds on after the error must find them charged, or the close would give back more
    # than was taken and the turn's budget would grow.
    reader = GeminiReader(rt.Policy(limits=rt.Limits(max_turn_arguments=1000)))
    reader.feed(_streamed(g_open("f")))
    for key in ("k0", "k1", "k2"):
        with pytest.raises(rt.MalformedChunkError, match="elements come in order"):
            reader.feed(_streamed(g_arg(f"$.{key}[0][1]", 1)))
    (call,) = reader.calls()
    assert call.tree is not None
    assert call.tree.size > 2  # containers were made
    assert 1000 - reader._budget == call.tree.size
    reader.feed(_streamed(G_CLOSE))
    (call,) = reader.calls()
    assert 1000 - reader._budget - call.room == len(call.text())  # its grant held apart
