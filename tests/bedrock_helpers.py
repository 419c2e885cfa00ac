"""The Bedrock recordings as a capture reads them, as boto3 yields them, and a boto3 client.

Shared by the Bedrock edge tests (server, command line, round trip). The client talks to a
loopback ``ReplayServer`` only: no credentials of the host, no instance metadata, no retries.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from rxtoolcalls.sources import read_jsonl

BEDROCK = Path(__file__).parent / "fixtures" / "wire" / "bedrock"
INVOKE = "openinference__claude35_text_then_two_tool_use"
"""The InvokeModelWithResponseStream recording: chunk envelopes, and their Anthropic events."""
TOOL_TURN = "pydantic-ai__nova_text_then_tool_use"
TEXT_TURN = "pydantic-ai__nova_text_after_tool_result"
REDACTED = "pydantic-ai__claude37_redacted_reasoning"
SIGNED = "pydantic-ai__claude4_reasoning_signature"
ASK = [{"role": "user", "content": [{"text": "What is the temperature of the capital of France?"}]}]
TOOLS: list[dict[str, Any]] = [
    {
        "toolSpec": {
            "name": "get_temperature",
            "description": "Get the temperature in a city.",
            "inputSchema": {
                "json": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": False,
                }
            },
        }
    }
]
"""The tool the two Nova recordings were made with, as Converse's ``toolConfig.tools``."""

Event = dict[str, Any]


def converse_names() -> list[str]:
    """Every ConverseStream recording (the InvokeModel one holds ``chunk`` envelopes)."""
    return sorted(
        path.name.removesuffix(".jsonl")
        for path in BEDROCK.glob("*.jsonl")
        if not path.name.endswith(".anthropic.jsonl") and not path.name.startswith(INVOKE)
    )


def load(name: str) -> list[Event]:
    """A recording as a capture reads it (``read_jsonl``): ``{name: data}``, ``p`` kept."""
    return list(read_jsonl(BEDROCK / f"{name}.jsonl"))


def without_padding(event: Event) -> Event:
    """An event without Bedrock's random padding ``p`` (no decoder yields it)."""
    ((name, body),) = event.items()
    return {name: {k: v for k, v in body.items() if k != "p"}}


def boto_shape(event: Event) -> Event:
    """A recorded event as boto3 yields it: no ``p``, blobs as ``bytes``.

    botocore 1.44 also drops the usage member its model does not know (``serverToolUsage``).
    """
    ((name, body),) = without_padding(event).items()
    body = dict(body)
    reasoning = body.get("delta", {}).get("reasoningContent")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("redactedContent"), str):
        blob = base64.b64decode(reasoning["redactedContent"])
        body["delta"] = {"reasoningContent": {**reasoning, "redactedContent": blob}}
    usage = body.get("usage")
    if name == "metadata" and isinstance(usage, dict):
        body["usage"] = {k: v for k, v in usage.items() if k != "serverToolUsage"}
    return {name: body}


def assembled(events: list[Any], **options: Any) -> rt.AssistantTurn:
    turn: rt.AssistantTurn = reactivex.from_iterable(events).pipe(rt.assemble(**options)).run()
    return turn


def visible(turn: rt.AssistantTurn) -> tuple[Any, ...]:
    """What a turn says, without ``usage`` (botocore drops members of it that it does not know)."""
    calls = [(c.index, c.id, c.name, c.parsed_arguments) for c in turn.tool_calls]
    return turn.to_message(), calls, turn.finish_reason, turn.content, turn.reasoning, turn.wire


boto3 = pytest.importorskip("boto3", reason="the bedrock extra (boto3) is not installed")


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing but the loopback server: no instance metadata, no profile of the host's."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def client(endpoint_url: str) -> Any:
    """A real boto3 ``bedrock-runtime`` client for a loopback endpoint: one attempt a call."""
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=endpoint_url,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=boto3.session.Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=5,
            read_timeout=5,
        ),
    )


def stream_of(bedrock: Any, messages: list[Any] | None = None, **request: Any) -> Any:
    """The ``EventStream`` of a ConverseStream request."""
    return bedrock.converse_stream(modelId="m", messages=messages or ASK, **request)["stream"]
