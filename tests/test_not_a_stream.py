"""What is not a provider's stream is refused with what to pass instead.

A framework's message chunk (LangChain's ``AIMessageChunk``), and a whole, non-streamed
response (``create(...)`` without ``stream=True``) given as an event, a source or to the agent.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from rxtoolcalls.wires import WIRES
from tests.helpers import load_fixture

# -- a framework's chunk ----------------------------------------------------------------------


class AIMessageChunk:
    """A stand-in for LangChain's class: its fields, no provider event around them."""

    type = "AIMessageChunk"

    def __init__(self) -> None:
        self.content = ""
        self.additional_kwargs: dict[str, Any] = {}
        self.response_metadata: dict[str, Any] = {}
        self.tool_call_chunks = [{"name": "f", "args": "{}", "id": "call_1", "index": 0}]


def refused(event: object, wire: rt.Wire | None = None) -> rt.MalformedChunkError:
    with pytest.raises(rt.MalformedChunkError) as raised:
        reactivex.of(event).pipe(rt.assemble(wire=wire)).run()
    return raised.value


@pytest.mark.parametrize("wire", [None, "chat"])
def test_a_langchain_chunk_says_what_is_read_and_what_to_pass(wire: rt.Wire | None) -> None:
    for event in (AIMessageChunk(), dict(vars(AIMessageChunk()), type="AIMessageChunk")):
        error = refused(event, wire)
        message = str(error)
        assert message.startswith("a LangChain AIMessageChunk is not a stream event"), message
        assert "tool_call_chunks" in message
        for spec in WIRES:  # what is read: every wire, from the registry
            assert spec.title in message
        assert "a 'AIMessageChunk'" not in message
        assert error.hint is not None
        assert "stream=True" in error.hint


def test_a_real_langchain_chunk_is_refused_the_same_way() -> None:
    if importlib.util.find_spec("langchain_core") is None:
        pytest.skip("needs langchain-core (the bench extra)")
    from langchain_core.messages import AIMessageChunk as Real

    chunk = Real(content="", tool_call_chunks=[{"name": "f", "args": "{}", "id": "c", "index": 0}])
    assert str(refused(chunk)).startswith("a LangChain AIMessageChunk is not a stream event")


def test_an_event_after_the_end_is_named_without_a_wrong_article() -> None:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": []}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    ]
    with pytest.raises(rt.MalformedChunkError) as raised:
        reactivex.from_iterable(events).pipe(rt.assemble()).run()
    assert str(raised.value).startswith("an event of type 'message_delta' after"), raised.value


# -- a whole response -------------------------------------------------------------------------


def chat_completion() -> Any:
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                }
            ],
        }
    )


def anthropic_message() -> Any:
    from anthropic.types import Message

    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def responses_response() -> Any:
    from openai.types.responses import Response

    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": "completed",
        }
    )


BEDROCK_CONVERSE = {
    "output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
    "metrics": {"latencyMs": 1},
}

ADVICE = "is a whole response, not a stream: pass stream=True, or on Bedrock call converse_stream"


def whole_responses() -> list[tuple[str, object, rt.Wire]]:
    return [
        ("Message", anthropic_message(), "anthropic"),
        ("Message dict", anthropic_message().model_dump(), "anthropic"),
        ("Response", responses_response(), "responses"),
        ("Response dict", responses_response().model_dump(), "responses"),
        ("converse", BEDROCK_CONVERSE, "bedrock"),
    ]


@pytest.mark.parametrize("case", range(5))
def test_a_whole_response_given_as_an_event_says_pass_stream_true(case: int) -> None:
    name, response, wire = whole_responses()[case]
    forced: tuple[rt.Wire | None, ...] = (None, "chat") if wire == "bedrock" else (None, wire)
    for given in forced:
        assert ADVICE in str(refused(response, given)), (name, given)


@pytest.mark.parametrize("form", ["sdk", "dict", "dict without object"])
def test_a_whole_chat_completion_given_as_an_event_says_pass_stream_true(form: str) -> None:
    completion = chat_completion()
    event: object = completion
    if form != "sdk":
        event = completion.model_dump()
    if form == "dict without object":
        del event["object"]  # type: ignore[attr-defined]
    wires: tuple[rt.Wire | None, ...] = (None, "chat")
    for given in wires:
        assert "pass stream=True" in str(refused(event, given))


def test_a_whole_response_given_to_a_source_is_a_type_error_at_once() -> None:
    for source, response in (
        (rt.from_openai_stream, chat_completion()),
        (rt.from_openai_stream, responses_response()),
        (rt.from_anthropic_stream, anthropic_message()),
    ):
        with pytest.raises(TypeError) as raised:
            source(response)
        message = str(raised.value)
        assert message.startswith(f"the {type(response).__name__} given"), (source, message)
        assert ADVICE in message


def test_a_whole_response_given_to_an_async_source_is_a_type_error_at_once() -> None:
    # (from_async_anthropic_stream refuses anything not async first, pointing to the sync one.)
    async def main() -> None:
        for response in (chat_completion(), responses_response()):
            with pytest.raises(TypeError, match=ADVICE):
                rt.from_async_openai_stream(response)

    asyncio.run(main())


def test_the_agent_says_it_in_the_same_words() -> None:
    errors: list[Exception] = []
    rt.agent_loop(lambda _: chat_completion(), {}, [{"role": "user", "content": "hi"}]).subscribe(
        on_error=errors.append
    )
    assert isinstance(errors[0], TypeError)
    assert "open_stream returned a ChatCompletion (it " + ADVICE in str(errors[0])


def test_a_stream_is_still_read() -> None:
    # The checks look at what is refused anyway: a stream's own events are untouched.
    chunks = [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "a"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    turn = reactivex.from_iterable(chunks).pipe(rt.assemble()).run()
    assert (turn.content, turn.finish_reason) == ("a", "stop")


@pytest.mark.parametrize(("returned", "said"), [(7, "an int"), (None, "a NoneType")])
def test_an_unusable_open_stream_value_has_its_article(returned: Any, said: str) -> None:
    errors: list[Exception] = []
    rt.agent_loop(lambda _: returned, {}, [{"role": "user", "content": "hi"}]).subscribe(
        on_error=errors.append
    )
    assert str(errors[0]).startswith(f"open_stream returned {said}")


def test_a_closing_summary_after_deltas_is_read_not_refused() -> None:
    # MiniMax ends its stream with the whole message as a chat.completion frame, after the
    # deltas: its finish and usage are read, its message is not a second copy of the turn.
    chunks = load_fixture("openai__parallel_tool_calls")
    streamed = reactivex.from_iterable(chunks).pipe(rt.assemble()).run()
    cut = [c for c in chunks if not any(ch.get("finish_reason") for ch in c.get("choices") or [])]
    summary = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": streamed.to_message(), "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 40, "total_tokens": 49},
    }
    turn = reactivex.from_iterable([*cut, summary]).pipe(rt.assemble()).run()
    assert turn.tool_calls == streamed.tool_calls
    assert turn.finish_reason == "tool_calls"
    assert turn.usage == summary["usage"]
