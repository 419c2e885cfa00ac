"""``early`` and the raised ceiling through the real SDKs, against the replay server.

The openai and anthropic clients, sync and async, read a two-call turn paced chunk by chunk;
each stream waits (bounded) before its finish until the early tool has started, so the test
proves the order without timing it. The ``chat`` command then raises the ceiling on every
wire, through each wire's own SDK: the server records where each request carries it.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.__main__ import main
from rxtoolcalls.serve import ReplayServer
from rxtoolcalls.wires import names
from tests.bedrock_helpers import aws  # noqa: F401 - a fixture, used by name
from tests.helpers import extra, open_sockets, settle
from tests.test_agent_early import Hanging
from tests.test_cli_chat_wires import EXTRA, SDK, _url
from tests.wire_builders import case, pieces

WAIT = 10.0
CALLS = (
    ("call_s", "search", pieces('{"q": "oslo"}')),
    ("call_f", "fetch", pieces('{"url": "https://a.test/"}')),
)
USER = {"chat": [{"role": "user", "content": "Find it."}]}


def chat_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    """A test chunk with the fields the openai SDK's model reads."""
    return {"id": "c1", "created": 0, "model": "m", **chunk}


def recordings(wire: str) -> list[list[dict[str, Any]]]:
    turn, answer = case(wire).turn(["Looking."], CALLS), case(wire).turn(["Found."])
    if wire == "chat":
        turn, answer = [chat_chunk(c) for c in turn], [chat_chunk(c) for c in answer]
    return [turn, answer]


def paced(wire: str) -> dict[int, list[float]]:
    return {0: [0.002] * len(recordings(wire)[0])}


def is_end(event: Any) -> bool:
    """The event that ends a turn, as the SDK yields it: Chat's finish, Anthropic's delta."""
    if getattr(event, "type", None) == "message_delta":
        return True
    choices: Any = getattr(event, "choices", None)
    return bool(choices) and choices[0].finish_reason is not None


class Runs:
    """The loop's tools, and the gate each stream waits on before its end."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.opened: list[bool] = []
        self.search_runs = 0
        self.log: list[str] = []

    def search(self, q: str) -> str:
        self.search_runs += 1
        self.started.set()
        return f"3 hits for {q}"

    async def search_async(self, q: str) -> str:
        return self.search(q)

    def fetch(self, url: str) -> str:
        self.log.append("fetch ran")
        return "<html>"

    def gated(self, stream: Any, gate: bool) -> Iterator[Any]:
        with stream:
            for event in stream:
                if gate and is_end(event):
                    self.opened.append(self.started.wait(WAIT))
                yield event
        self.log.append("stream ended")

    async def gated_async(self, stream: Any, gate: bool) -> AsyncIterator[Any]:
        async with stream:
            async for event in stream:
                if gate and is_end(event):
                    opened = await asyncio.get_running_loop().run_in_executor(
                        None, self.started.wait, WAIT
                    )
                    self.opened.append(opened)
                yield event


def sync_client(wire: str, server: ReplayServer) -> Any:
    if wire == "chat":
        openai = pytest.importorskip("openai", reason=extra("openai"))
        return openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    return anthropic.Anthropic(api_key="x", base_url=server.root_url, max_retries=0)


def async_client(wire: str, server: ReplayServer) -> Any:
    if wire == "chat":
        openai = pytest.importorskip("openai", reason=extra("openai"))
        return openai.AsyncOpenAI(api_key="x", base_url=server.base_url, max_retries=0)
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    return anthropic.AsyncAnthropic(api_key="x", base_url=server.root_url, max_retries=0)


def request(client: Any, wire: str, messages: list[Any]) -> Any:
    if wire == "chat":
        return client.chat.completions.create(model="m", messages=messages, stream=True)
    return client.messages.create(model="m", max_tokens=64, messages=messages, stream=True)


def messages_of(wire: str) -> list[dict[str, Any]]:
    return [case(wire).user(["Find it."], False)]


def run_sync(wire: str, early: set[str] | None) -> tuple[rt.Conversation, Runs, int]:
    runs = Runs()
    with ReplayServer(recordings(wire), delays=paced(wire)) as server:
        client = sync_client(wire, server)

        def open_stream(messages: list[Any]) -> Any:
            return runs.gated(request(client, wire, messages), early is not None)

        tools = {"search": runs.search, "fetch": runs.fetch}
        loop = rt.agent_loop(open_stream, tools, messages_of(wire), early=early)
        conversation = loop.pipe(rt.final_conversation()).run()
        return conversation, runs, len(server.requests)


def run_async(wire: str, early: set[str] | None) -> tuple[rt.Conversation, Runs, int]:
    runs = Runs()
    with ReplayServer(recordings(wire), delays=paced(wire)) as server:

        async def go() -> rt.Conversation:
            client = async_client(wire, server)

            async def open_stream(messages: list[Any]) -> Any:
                stream = await request(client, wire, messages)
                return runs.gated_async(stream, early is not None)

            tools = {"search": runs.search_async, "fetch": runs.fetch}
            loop = rt.agent_loop(open_stream, tools, messages_of(wire), early=early)
            conversation = await asyncio.wait_for(loop.pipe(rt.final_conversation()), 30)
            await client.close()
            return conversation

        return asyncio.run(go()), runs, len(server.requests)


@pytest.mark.parametrize("wire", ["chat", "anthropic"])
@pytest.mark.parametrize("run", [run_sync, run_async], ids=["sync", "async"])
def test_the_sdk_client_starts_the_early_tool_before_the_turn_ends_same_transcript(
    wire: str, run: Any
) -> None:
    without, plain_runs, plain_requests = run(wire, None)
    with_early, runs, requests = run(wire, {"search"})
    assert runs.opened[0] is True  # search ran before the first stream's end was read
    if run is run_sync:  # fetch, not named early, waited for the stream's end
        assert runs.log.index("stream ended") < runs.log.index("fetch ran")
    assert with_early.messages == without.messages
    assert (runs.search_runs, plain_runs.search_runs) == (1, 1)
    assert requests == plain_requests == 2


def test_dispose_during_an_early_tool_over_http_cancels_it_and_sends_no_request() -> None:
    openai = pytest.importorskip("openai", reason=extra("openai"))
    turn = [chat_chunk(c) for c in case("chat").turn(["Looking."], CALLS)]
    # The stream stalls before its finish: the loop is disposed while search runs.
    stalls = {0: [0.0] * (len(turn) - 1) + [WAIT]}
    before = open_sockets()
    with ReplayServer([turn], delays=stalls) as server:

        async def go() -> None:
            client = openai.AsyncOpenAI(api_key="x", base_url=server.base_url, max_retries=0)
            search = Hanging()

            def open_stream(messages: list[Any]) -> Any:
                return client.chat.completions.create(model="m", messages=messages, stream=True)

            seen: list[Any] = []
            subscription = (
                rt.agent_loop(
                    open_stream,
                    {"search": search, "fetch": Runs().fetch},
                    USER["chat"],
                    early={"search"},
                )
                .pipe(ops.do_action(seen.append))
                .subscribe()
            )
            await asyncio.wait_for(search.started.wait(), WAIT)
            subscription.dispose()
            await asyncio.wait_for(search.cancelled.wait(), WAIT)
            await client.close()
            assert [type(e).__name__ for e in seen][-1] == "ToolCallEarly"

        threads = threading.active_count()
        asyncio.run(go())
        # The stream's connection is closed (the server sees it leave), and no thread is left.
        assert settle(lambda: server.disconnects == 1, WAIT)
        assert len(server.requests) == 1
        assert settle(lambda: threading.active_count() <= threads, WAIT)
    assert settle(lambda: open_sockets() <= before, WAIT)


# -- the ceiling, raised on every wire through its SDK -------------------------------------

CEILING = {
    "chat": lambda body: body["max_tokens"],
    "responses": lambda body: body["max_output_tokens"],
    "anthropic": lambda body: body["max_tokens"],
    "gemini": lambda body: body["generationConfig"]["maxOutputTokens"],
    "bedrock": lambda body: body["inferenceConfig"]["maxTokens"],
}


@pytest.mark.parametrize("wire", names())
@pytest.mark.usefixtures("aws")
def test_chat_raises_the_ceiling_of_a_truncated_turn_on_each_wire(
    wire: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip(SDK.get(wire, "boto3"), reason=extra(EXTRA.get(wire, "bedrock")))
    tools = tmp_path / "tools.py"
    tools.write_text('def lookup(term):\n    """Look a term up."""\n    return term.upper()\n')
    entry = case(wire)
    cut = [*entry.cut(["Looking."], "call_1", "lookup", "term", "os"), *entry.ceiling]
    asked = entry.turn(calls=[("call_1", "lookup", ['{"term": ', '"oslo"}'])])
    answer = entry.turn(["Found ", "it."])
    with ReplayServer([cut, cut, asked, answer]) as server:
        out = io.StringIO()
        argv = ["--progress", "chat", "Where?", "--wire", wire, "--base-url", _url(server, wire)]
        argv += ["--model", "m", "--python", f"{tools}:lookup", "--early", "lookup"]
        argv += ["--max-tokens", "64", "--max-tokens-limit", "256"]
        code = main(argv, out=out)
        err = capsys.readouterr().err
        assert (code, out.getvalue().strip()) == (0, "Found it."), err
        ceilings = [CEILING[wire](body) for body in server.requests]
    assert ceilings == [64, 128, 256, 64]
    assert "retrying turn 1 with max tokens 128" in err
    assert "OSLO" in json.dumps(server.requests[-1])


def test_chat_ceiling_flags_misused_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["chat", "Hi", "--base-url", "http://127.0.0.1:9", "--model", "m"]
    for extra_args, says in [
        (["--max-tokens-limit", "100"], "give --max-tokens"),
        (["--max-tokens", "200", "--max-tokens-limit", "100"], "below the ceiling"),
        (["--early", "nope"], "no tool of that name is loaded (from --tools or --python)"),
    ]:
        assert main([*base, *extra_args], out=io.StringIO()) == 2
        err = capsys.readouterr().err
        assert says in err
        assert err.count("\n") == 1


def test_a_stream_dropped_after_the_early_tool_answered_is_retried_and_reuses_it() -> None:
    """Over HTTP: the server drops the first stream; search ran once, its answer reused."""
    from tests.test_early import readiness

    openai = pytest.importorskip("openai", reason=extra("openai"))
    turn, answer = recordings("chat")
    complete_at = readiness(turn, {"search", "fetch"})[0][0]
    ledger: dict[str, str | None] = {}
    runs = Runs()

    def answered() -> bool:
        return any(v is not None for v in ledger.values())

    with ReplayServer([turn, turn, answer], cut={0: complete_at + 1}) as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)

        def open_stream(messages: list[Any]) -> Any:
            def read(stream: Any) -> Iterator[Any]:
                with stream:
                    for at, event in enumerate(stream):
                        yield event
                        if at == complete_at and len(server.requests) == 1:
                            # Read on only once search has answered: then the drop shows.
                            runs.opened.append(settle(answered, WAIT))

            return read(client.chat.completions.create(model="m", messages=messages, stream=True))

        loop = rt.agent_loop(
            open_stream,
            {"search": runs.search, "fetch": runs.fetch},
            USER["chat"],
            early={"search"},
            ledger=ledger,
            backoff=0,
        )
        events = loop.pipe(ops.to_list()).run()
        assert len(server.requests) == 3
    assert runs.opened == [True]
    retracted = [e for e in events if isinstance(e, rt.ToolCallRetracted)]
    assert [(r.call.name, r.cancelled) for r in retracted] == [("search", False)]
    assert isinstance(retracted[0].error, rt.StreamInterruptedError)
    assert runs.search_runs == 1
    finished = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert [(f.call.name, f.reused) for f in finished] == [("search", True), ("fetch", False)]
    conversation = events[-1]
    assert isinstance(conversation, rt.Conversation)
    tool_messages = [m for m in conversation.messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["3 hits for oslo", "<html>"]
