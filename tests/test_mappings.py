"""Events of any ``Mapping`` type read as the plain dicts they hold, on every registered wire.

``json.loads(..., object_pairs_hook=OrderedDict)`` makes every object an ``OrderedDict``; a
caller may also hand over a read-only view or a ``Mapping`` of its own. An event that is such
a ``Mapping`` is read at every depth; inside a plain dict, dict subclasses are read as dicts,
and a ``Mapping`` that is no dict is read or refused with a typed error (finding one would
mean walking every event).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import Any

import pytest

import rxtoolcalls as rt
from rxtoolcalls.wires import names
from tests.helpers import NotADict
from tests.wire_builders import case, per_wire, rx_turn, turn_of


def deep(value: Any, make: Callable[[dict[str, Any]], Any]) -> Any:
    if isinstance(value, dict):
        return make({k: deep(v, make) for k, v in value.items()})
    if isinstance(value, list):
        return [deep(v, make) for v in value]
    return value


def nested_only(value: dict[str, Any], make: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    return {k: deep(v, make) for k, v in value.items()}


MAKERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "OrderedDict": OrderedDict,
    "MappingProxyType": MappingProxyType,
    "a Mapping": NotADict,
}


# Every recording of every registered wire (the table in tests/wire_builders.py lists them).
RECORDED = per_wire(lambda entry: entry.recordings())


def outcome(run: Callable[..., rt.AssistantTurn], events: list[Any]) -> Any:
    try:
        turn = run(events)
    except rt.ToolCallStreamError as error:
        return (type(error), str(error))
    return (
        [(c.id, c.name, c.arguments) for c in turn.tool_calls],
        turn.content,
        turn.finish_reason,
        turn.usage,
        turn.wire,
        turn.items,
    )


@pytest.mark.parametrize("maker", MAKERS)
@pytest.mark.parametrize("depth", ["every level", "nested only"])
@pytest.mark.parametrize(("wire", "name"), RECORDED)
def test_any_mapping_reads_as_the_plain_dict(wire: str, name: str, depth: str, maker: str) -> None:
    events = case(wire).load(name)
    make = MAKERS[maker]
    shaped = [deep(e, make) if depth == "every level" else nested_only(e, make) for e in events]
    for run in (turn_of, rx_turn):
        expected = outcome(run, events)
        got = outcome(run, shaped)
        if depth == "nested only" and maker != "OrderedDict" and got != expected:
            # Read where a reader asks any object for a field, refused where it wants a dict:
            # never a crash, never a turn that differs, never a part silently passed over.
            assert got[0] is rt.MalformedChunkError
        else:
            assert got == expected


def test_a_mapping_that_cannot_be_read_is_a_typed_error() -> None:
    class Broken(NotADict):
        def __iter__(self) -> Iterator[str]:
            raise OSError("gone")

    with pytest.raises(rt.MalformedChunkError, match="raised OSError"):
        turn_of([Broken({"type": "response.created", "response": {"id": "r"}})])


def test_an_ordered_dict_usage_inside_a_plain_chunk_is_kept_as_a_dict() -> None:
    chunk = {
        "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
        "usage": OrderedDict(prompt_tokens=3, completion_tokens=1),
    }
    turn = turn_of([chunk])
    assert turn.usage == {"prompt_tokens": 3, "completion_tokens": 1}
    assert type(turn.usage) is dict


def test_a_mapping_nested_where_a_field_is_read_is_read_never_passed_over() -> None:
    call = {"functionCall": {"name": "delete_path", "args": {"path": "/tmp/x"}}}
    content = MappingProxyType({"role": "model", "parts": [call]})
    turn = turn_of([{"candidates": [{"content": content, "finishReason": "STOP"}]}])
    assert [c.name for c in turn.tool_calls] == ["delete_path"]
    blocked = {"promptFeedback": MappingProxyType({"blockReason": "SAFETY"})}
    with pytest.raises(rt.ContentFilteredError):
        turn_of([blocked])
    error = {"error": MappingProxyType({"code": 400, "message": "API key not valid"})}
    with pytest.raises(rt.ProviderError) as caught:
        turn_of([{"candidates": [], **error}])
    assert (caught.value.code, caught.value.retryable) == (400, False)


def test_an_anthropic_stop_reason_in_a_mapping_delta_is_read() -> None:
    events = [
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": MappingProxyType({"stop_reason": "max_tokens"})},
        {"type": "message_stop"},
    ]
    assert turn_of(events).finish_reason == "max_tokens"


class Flaky(NotADict):
    """A Mapping whose every reading fails."""

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("backend gone")

    def __contains__(self, key: object) -> bool:
        raise RuntimeError("backend gone")

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("backend gone")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("backend gone")


@pytest.mark.parametrize("wire", [None, *names()])
def test_a_mapping_whose_lookup_fails_is_a_typed_error(wire: str | None) -> None:
    with pytest.raises(rt.MalformedChunkError, match="raised RuntimeError"):
        turn_of([Flaky({"choices": []})], wire=wire)


@pytest.mark.parametrize(("wire", "where"), per_wire(lambda entry: list(entry.nested)))
def test_a_nested_mapping_whose_lookup_fails_is_a_typed_error(wire: str, where: str) -> None:
    event = case(wire).nested[where](Flaky({"x": 1}))
    with pytest.raises(rt.MalformedChunkError, match="RuntimeError"):
        turn_of([event], wire=wire)
    with pytest.raises(rt.MalformedChunkError, match="RuntimeError"):
        turn_of([event])


def test_a_kept_mapping_whose_reading_fails_is_a_typed_error() -> None:
    part = {"inlineData": Flaky({"mimeType": "image/png"})}
    with pytest.raises(rt.MalformedChunkError, match="cannot be read"):
        turn_of([{"candidates": [{"content": {"parts": [part]}}]}])
