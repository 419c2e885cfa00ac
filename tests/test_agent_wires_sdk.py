"""The agent loop with the real openai and anthropic clients, over an in-memory HTTP transport."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

import rxtoolcalls as rt
from tests.helpers import extra
from tests.test_agent_wires import a_answer, a_turn, r_answer, r_turn
from tests.wire_builders import a_piece, a_start, a_tool_open


def sse(events: list[dict[str, Any]]) -> bytes:
    """The events as the providers send them: ``event:`` the type, ``data:`` the JSON."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


class Provider:
    """Answers each POST with the next recorded stream and keeps every request body."""

    def __init__(self, http: str, *streams: list[dict[str, Any]]) -> None:
        # openai's client is built on httpx, anthropic's on its fork httpx2.
        self.httpx: Any = pytest.importorskip(http, reason=extra("test"))
        self.streams = list(streams)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.bodies.append(json.loads(request.content))
        body = sse(self.streams[len(self.bodies) - 1])
        headers = {"content-type": "text/event-stream"}
        return self.httpx.Response(200, content=body, headers=headers)

    def http(self) -> Any:
        return self.httpx.Client(transport=self.httpx.MockTransport(self))

    def async_http(self) -> Any:
        return self.httpx.AsyncClient(transport=self.httpx.MockTransport(self))


def test_openai_responses_client_runs_the_loop() -> None:
    openai = pytest.importorskip("openai", reason=extra("openai"))
    provider = Provider(
        "httpx", r_turn((0, "call_w", "weather", '{"city": "Oslo"}')), r_answer("Cold.")
    )
    client = openai.OpenAI(
        api_key="unused", base_url="http://api.test/v1", http_client=provider.http()
    )

    def open_stream(items: list[Any]) -> Any:
        return client.responses.create(model="m", input=items, stream=True)

    def weather(city: str) -> str:
        return f"-3 C in {city}"

    user = [{"role": "user", "content": "Oslo?"}]
    conversation = (
        rt.agent_loop(open_stream, {"weather": weather}, user).pipe(rt.final_conversation()).run()
    )
    assert conversation.final.content == "Cold."
    sent = provider.bodies[1]["input"]
    assert [e.get("type") for e in sent[1:]] == ["function_call", "function_call_output"]
    assert sent[2] == {
        "type": "function_call_output",
        "call_id": "call_w",
        "output": "-3 C in Oslo",
    }


def test_anthropic_client_runs_the_loop_and_marks_errors() -> None:
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    provider = Provider(
        "httpx2",
        a_turn((1, "toolu_w", "weather", '{"city": "Oslo"}'), text="Checking."),
        a_answer(),
    )
    client = anthropic.Anthropic(
        api_key="unused", base_url="http://api.test", http_client=provider.http(), max_retries=0
    )

    def open_stream(messages: list[Any]) -> Any:
        return client.messages.create(model="m", max_tokens=100, messages=messages, stream=True)

    def weather(city: str) -> str:
        raise TimeoutError("the weather service is down")

    user = [{"role": "user", "content": "Oslo?"}]
    conversation = (
        rt.agent_loop(open_stream, {"weather": weather}, user).pipe(rt.final_conversation()).run()
    )
    assert conversation.final.content == "Done."
    assistant, results = provider.bodies[1]["messages"][1:]
    assert assistant["content"][1] == {
        "type": "tool_use",
        "id": "toolu_w",
        "name": "weather",
        "input": {"city": "Oslo"},
    }
    assert results["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_w",
            "content": "TimeoutError: the weather service is down",
            "is_error": True,
        }
    ]


@pytest.mark.parametrize("kind", ["overloaded_error", "invalid_request_error"])
def test_anthropic_client_error_event_is_typed_by_its_code(kind: str) -> None:
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    failing = [
        a_start(),
        a_tool_open(0, "toolu_a", "f"),
        a_piece(0, '{"a"'),
        {"type": "error", "error": {"type": kind, "message": "no"}},
    ]
    provider = Provider(
        "httpx2", failing, failing, a_turn((0, "toolu_a", "f", '{"a": 1}')), a_answer()
    )
    client = anthropic.Anthropic(
        api_key="unused", base_url="http://api.test", http_client=provider.http(), max_retries=0
    )
    ran: list[int] = []

    def f(a: int) -> str:
        ran.append(a)
        return "ok"

    def open_stream(messages: list[Any]) -> Any:
        return client.messages.create(model="m", max_tokens=100, messages=messages, stream=True)

    events: list[Any] = []
    errors: list[Exception] = []
    loop = rt.agent_loop(open_stream, {"f": f}, [{"role": "user", "content": "x"}], backoff=0)
    loop.subscribe(events.append, errors.append)
    retried = [e.error for e in events if isinstance(e, rt.TurnRetried)]
    assert all(isinstance(e, rt.ProviderError) and e.code == kind for e in [*retried, *errors])
    if kind == "overloaded_error":
        assert len(retried) == 2
        assert not errors
        assert ran == [1]
        assert len(provider.bodies) == 4
    else:
        assert not retried
        assert len(errors) == 1
        assert isinstance(errors[0], rt.ProviderError)
        assert errors[0].retryable is False
        assert ran == []
        assert len(provider.bodies) == 1


def test_async_clients_run_the_loop_on_the_running_loop() -> None:
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    openai = pytest.importorskip("openai", reason=extra("openai"))
    a_provider = Provider(
        "httpx2", a_turn((0, "toolu_w", "weather", '{"city": "Oslo"}')), a_answer()
    )
    r_provider = Provider("httpx", r_turn((0, "call_w", "weather", '{"city": "Oslo"}')), r_answer())
    seen_threads: list[int] = []

    async def weather(city: str) -> str:
        seen_threads.append(threading.get_ident())
        await asyncio.sleep(0)
        return f"-3 C in {city}"

    async def main() -> tuple[rt.Conversation, rt.Conversation]:
        a_client = anthropic.AsyncAnthropic(
            api_key="unused",
            base_url="http://api.test",
            http_client=a_provider.async_http(),
            max_retries=0,
        )
        r_client = openai.AsyncOpenAI(
            api_key="unused", base_url="http://api.test/v1", http_client=r_provider.async_http()
        )

        def open_messages(messages: list[Any]) -> Any:
            return a_client.messages.create(
                model="m", max_tokens=100, messages=messages, stream=True
            )

        def open_responses(items: list[Any]) -> Any:
            return r_client.responses.create(model="m", input=items, stream=True)

        user = [{"role": "user", "content": "Oslo?"}]
        tools = {"weather": weather}
        on_anthropic = await rt.agent_loop(open_messages, tools, user).pipe(rt.final_conversation())
        on_responses = await rt.agent_loop(open_responses, tools, user).pipe(
            rt.final_conversation()
        )
        return on_anthropic, on_responses

    here = threading.get_ident()
    on_anthropic, on_responses = asyncio.run(main())
    assert seen_threads == [here, here]
    assert on_anthropic.messages[2]["content"][0]["content"] == "-3 C in Oslo"
    assert on_responses.messages[2]["output"] == "-3 C in Oslo"
    assert a_provider.bodies[1]["messages"] == list(on_anthropic.messages[:3])
    assert r_provider.bodies[1]["input"] == list(on_responses.messages[:3])


def test_the_anthropic_manager_itself_runs_the_loop_and_is_entered_on_each_retry() -> None:
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    cut = [a_start(), a_tool_open(0, "toolu_a", "f"), a_piece(0, '{"a"')]
    provider = Provider("httpx2", cut, a_turn((0, "toolu_a", "f", '{"a": 1}')), a_answer())
    client = anthropic.Anthropic(
        api_key="unused", base_url="http://api.test", http_client=provider.http(), max_retries=0
    )
    ran: list[int] = []

    def f(a: int) -> str:
        ran.append(a)
        return "ok"

    def open_stream(messages: list[Any]) -> Any:
        # The manager, not entered: the loop's source enters it for each attempt.
        return client.messages.stream(model="m", max_tokens=100, messages=messages)

    events: list[Any] = []
    loop = rt.agent_loop(open_stream, {"f": f}, [{"role": "user", "content": "x"}], backoff=0)
    loop.subscribe(events.append)
    assert [type(e).__name__ for e in events if isinstance(e, rt.TurnRetried)] == ["TurnRetried"]
    assert ran == [1]
    assert len(provider.bodies) == 3  # the cut turn, its retry, the answer
    assert isinstance(events[-1], rt.Conversation)
