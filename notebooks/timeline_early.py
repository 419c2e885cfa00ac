"""Draw ``timeline_early.png``: one agent-loop turn of two calls, without and with ``early``.

A Chat turn served by ``ReplayServer`` over HTTP and read through the openai client: call 0
(``get_weather``, a 0.7 s tool) is complete early in the stream, call 1 (``get_time``, quick)
only at its end; the next turn answers. With ``early={"get_weather"}`` the slow tool runs
while the stream goes on, and the answer comes about 0.7 s sooner. From a checkout, with the
``viz`` and ``notebooks`` extras::

    python notebooks/timeline_early.py [PICTURE]

``PICTURE`` defaults to ``timeline_early.png`` beside this file.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from rxtoolcalls import viz
from rxtoolcalls.serve import ReplayServer

PICTURE = Path(__file__).with_name("timeline_early.png")
QUESTION = [{"role": "user", "content": "Weather and time in Paris?"}]
SLOW = 0.7  # seconds get_weather takes


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _call(index: int, arguments: str, name: str | None = None) -> dict[str, Any]:
    function = {"arguments": arguments} if name is None else {"name": name, "arguments": ""}
    entry: dict[str, Any] = {"index": index, "function": function}
    if name is not None:
        entry |= {"id": f"call_{index}", "type": "function"}
    return _chunk({"tool_calls": [entry]})


TURN = [
    _chunk({"role": "assistant"}),
    _call(0, "", "get_weather"),
    _call(0, '{"city": '),
    _call(0, '"Paris"}'),
    _call(1, "", "get_time"),  # the stream moved past call 0: get_weather may start
    _call(1, '{"zone": '),
    _call(1, '"Europe/'),
    _call(1, 'Paris"'),
    _call(1, "}"),
    _chunk({}, "tool_calls"),
]
# The pause after each chunk: call 0 comes fast, call 1 slowly.
PAUSES = [0.05, 0.05, 0.05, 0.05, 0.1, 0.2, 0.2, 0.2, 0.2, 0.0]
ANSWER = [
    _chunk({"role": "assistant", "content": "Sunny in Paris,"}),
    _chunk({"content": " and it is noon."}),
    _chunk({}, "stop"),
]


def record(scale: float = 1.0) -> tuple[viz.AgentTimeline, viz.AgentTimeline]:
    """The conversation without and with ``early``, every pause and tool time times ``scale``."""
    import openai

    def get_weather(city: str) -> str:
        time.sleep(SLOW * scale)
        return f"sunny in {city}"

    def get_time(zone: str) -> str:
        time.sleep(0.05 * scale)
        return f"12:00 in {zone}"

    tools = {"get_weather": get_weather, "get_time": get_time}
    pauses = [pause * scale for pause in PAUSES]
    with ReplayServer([TURN, ANSWER], delay=0.05 * scale, delays={0: pauses}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused")

        def open_stream(messages: Any) -> Any:
            return client.chat.completions.create(model="m", messages=messages, stream=True)

        runs = []
        for early in (None, {"get_weather"}):
            server.reset()
            runs.append(viz.agent_timeline(open_stream, tools, QUESTION, early=early))
    late, soon = runs
    return late, soon


def main(picture: str | Path = PICTURE, scale: float = 1.0) -> None:
    """Record both conversations and draw them to ``picture``."""
    late, soon = record(scale)
    viz.draw_agent([late, soon], picture)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else PICTURE)
