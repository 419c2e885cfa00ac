"""The real openai SDK: its chunk objects, its HTTP stream, and its own accumulator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.helpers import extra

openai = pytest.importorskip("openai", reason=extra("openai"))
httpx2 = pytest.importorskip("httpx2", reason=extra("openai"))

from openai.lib.streaming.chat import ChatCompletionStreamState  # noqa: E402
from openai.types.chat import ChatCompletionChunk  # noqa: E402

import rxtoolcalls as rt  # noqa: E402
from tests.helpers import (  # noqa: E402
    Chunk,
    fixture_names,
    load_fixture,
    outcome,
    run_assemble,
    run_assembler,
)
from tests.test_properties import turns  # noqa: E402


def _sse(chunks: list[Chunk]) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return body.encode()


def _client(body: bytes) -> Any:
    def handler(request: Any) -> Any:
        assert request.url.path.endswith("/chat/completions")
        assert json.loads(request.content)["stream"] is True
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return openai.OpenAI(
        api_key="test",
        base_url="http://fake.invalid/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def _sdk_chunks(chunks: list[Chunk]) -> list[Any]:
    client = _client(_sse(chunks))
    with client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    ) as stream:
        return list(stream)


@pytest.mark.parametrize("name", fixture_names())
def test_sdk_objects_assemble_like_dicts(name: str) -> None:
    chunks = load_fixture(name)
    objects = _sdk_chunks(chunks)
    assert objects
    assert all(isinstance(o, ChatCompletionChunk) for o in objects)
    for flag in (True, False):
        expected = outcome(run_assembler, chunks, require_finish_reason=flag)
        assert outcome(run_assembler, objects, require_finish_reason=flag) == expected
        assert outcome(run_assemble, objects, require_finish_reason=flag) == expected


def test_sdk_reasoning_extras_are_read() -> None:
    objects = _sdk_chunks(load_fixture("deepseek__reasoner_tool_call"))
    turn = run_assemble(objects)
    assert turn.reasoning
    assert turn.reasoning == run_assemble(load_fixture("deepseek__reasoner_tool_call")).reasoning


def test_sdk_stream_cut_midway_is_an_interruption() -> None:
    # The SDK raises nothing when the body ends early; the missing finish_reason tells.
    chunks = load_fixture("openai__parallel_tool_calls")[:9]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode()
    client = _client(body)
    stream = client.chat.completions.create(model="m", messages=[], stream=True)
    with pytest.raises(rt.StreamInterruptedError):
        run_assemble(list(stream))


def _sdk_state(chunks: list[Chunk]) -> Any:
    state = ChatCompletionStreamState()
    for chunk in chunks:
        full = {"id": "c", "created": 0, "model": "m", "object": "chat.completion.chunk", **chunk}
        state.handle_chunk(ChatCompletionChunk.model_validate(full))
    return state.get_final_completion()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns(dense=True))  # the SDK crashes on other indices (quirk 3)
def test_same_result_as_the_sdk_accumulator(
    case: tuple[list[Chunk], list[tuple[int, str, str, str]], str | None],
) -> None:
    chunks, _, _ = case
    ours = run_assembler(chunks)
    theirs = _sdk_state(chunks).choices[0]
    assert ours.finish_reason == theirs.finish_reason
    assert ours.content == theirs.message.content
    their_calls = theirs.message.tool_calls or []
    assert [(c.id, c.name, c.arguments) for c in ours.tool_calls] == [
        (c.id, c.function.name, c.function.arguments) for c in their_calls
    ]
