"""The Bedrock round trip: Converse messages, the agent loop through boto3, transcripts, tools.

``turn.to_message()`` and ``turn.tool_messages()`` are Converse content blocks; botocore checks
every request against its model before sending it, so each request a test sends through the
real client is also a check of the shapes. The agent loop runs the two recorded Nova turns (a
tool turn, then the text after its result) against a ``ReplayServer``.
"""

from __future__ import annotations

import base64
import itertools
import json
from dataclasses import replace
from typing import Any

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.agent import (
    Conversation,
    ToolCallFinished,
    TurnFinished,
    TurnRetried,
    agent_loop,
    final_conversation,
)
from rxtoolcalls.serve import ReplayServer
from rxtoolcalls.transcript import (
    CANCELLED,
    find_unanswered,
    repair_transcript,
    transcript_wire,
)
from tests.bedrock_helpers import (
    ASK,
    REDACTED,
    SIGNED,
    TEXT_TURN,
    TOOL_TURN,
    TOOLS,
    assembled,
    aws,  # noqa: F401 - a fixture, used by name
    client,
    load,
    stream_of,
)
from tests.helpers import extra

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = [pytest.mark.usefixtures("aws"), pytest.mark.json_parser]

CALL_ID = "tooluse_lAG_zP8QRHmSYOwZzzaCqA"
ANSWER = "The current temperature in Paris, the capital of France, is 30°C."


def as_sent(value: Any) -> Any:
    """Messages as the request body carries them: JSON, blobs as base64."""

    def blob(b: object) -> str:
        assert isinstance(b, bytes)
        return base64.b64encode(b).decode("ascii")

    return json.loads(json.dumps(value, default=blob))


def sent(messages: list[Any], recording: list[dict[str, Any]] | None = None) -> Any:
    """The messages a boto3 ConverseStream request carried (botocore checked them first)."""
    with ReplayServer([recording or load(TEXT_TURN)]) as server:
        rt.from_bedrock_stream(stream_of(client(server.root_url), messages)).pipe(
            rt.assemble()
        ).run()
        return server.requests[0]["messages"]


def tool_use_events(*calls: tuple[str, str, str]) -> list[dict[str, Any]]:
    """A ConverseStream turn of ``toolUse`` blocks: (id, name, input) each."""
    events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
    for index, (call_id, name, arguments) in enumerate(calls):
        start = {"toolUse": {"toolUseId": call_id, "name": name}}
        events += [
            {"contentBlockStart": {"contentBlockIndex": index, "start": start}},
            {
                "contentBlockDelta": {
                    "contentBlockIndex": index,
                    "delta": {"toolUse": {"input": arguments}},
                }
            },
            {"contentBlockStop": {"contentBlockIndex": index}},
        ]
    return [*events, {"messageStop": {"stopReason": "tool_use"}}]


# -- messages --------------------------------------------------------------------------------------


def test_to_message_is_converse_text_and_tool_use_blocks() -> None:
    turn = assembled(load(TOOL_TURN))
    (text,) = [e["contentBlockDelta"]["delta"]["text"] for e in load(TOOL_TURN)[1:2]]
    message = turn.to_message()
    assert message == {
        "role": "assistant",
        "content": [
            {"text": turn.content},
            {
                "toolUse": {
                    "toolUseId": CALL_ID,
                    "name": "get_temperature",
                    "input": {"city": "Paris"},
                }
            },
        ],
    }
    assert turn.content is not None
    assert turn.content.startswith(text)
    assert sent([*ASK, message, {"role": "user", "content": [{"text": "go on"}]}])[1] == message


def test_reasoning_blocks_go_back_verbatim() -> None:
    signed = assembled(load(SIGNED))
    signature = "".join(
        e["contentBlockDelta"]["delta"]["reasoningContent"].get("signature", "")
        for e in load(SIGNED)
        if "reasoningContent" in e.get("contentBlockDelta", {}).get("delta", {})
    )
    assert signature.startswith("Eu0CCkgI")
    first = signed.to_message()["content"][0]
    assert first == {
        "reasoningContent": {"reasoningText": {"text": signed.reasoning, "signature": signature}}
    }
    redacted = assembled(load(REDACTED)).to_message()
    recorded = [
        e["contentBlockDelta"]["delta"]["reasoningContent"]["redactedContent"]
        for e in load(REDACTED)
        if "reasoningContent" in e.get("contentBlockDelta", {}).get("delta", {})
    ]
    assert redacted["content"][:2] == [
        {"reasoningContent": {"redactedContent": base64.b64decode(text)}} for text in recorded
    ]
    # boto3 takes them back as they are, blobs as bytes; the body carries the recorded base64.
    follow = {"role": "user", "content": [{"text": "and then?"}]}
    for message in (signed.to_message(), redacted):
        assert sent([*ASK, message, follow])[1] == as_sent(message)
    assert [b["reasoningContent"]["redactedContent"] for b in as_sent(redacted)["content"][:2]] == (
        recorded
    )


def test_tool_messages_are_one_user_message_of_tool_results() -> None:
    turn = assembled(
        tool_use_events(("tu_a", "f", '{"x": 1}'), ("tu_b", "g", "{}"), ("tu_c", "h", "{}"))
    )
    messages = turn.tool_messages([{"celsius": 30}, "30°C", RuntimeError("the sensor is down")])
    (message,) = messages
    assert message["role"] == "user"
    answered, said, failed = message["content"]
    assert answered == {"toolResult": {"toolUseId": "tu_a", "content": [{"json": {"celsius": 30}}]}}
    assert said == {"toolResult": {"toolUseId": "tu_b", "content": [{"text": "30°C"}]}}
    # A failure is its text, marked as an error.
    assert failed["toolResult"]["status"] == "error"
    assert failed["toolResult"]["toolUseId"] == "tu_c"
    (part,) = failed["toolResult"]["content"]
    assert set(part) == {"text"}
    assert "the sensor is down" in part["text"]
    assert turn.tool_messages({"tu_c": "c", "tu_a": "a", "tu_b": "b"})[0]["content"] == [
        {"toolResult": {"toolUseId": i, "content": [{"text": t}]}}
        for i, t in (("tu_a", "a"), ("tu_b", "b"), ("tu_c", "c"))
    ]
    transcript = [*ASK, turn.to_message(), *messages]
    assert sent(transcript) == as_sent(transcript)


# -- the agent loop through boto3 ------------------------------------------------------------------


def get_temperature(city: str) -> str:
    return "30°C"


def get_temperature_json(city: str) -> dict[str, Any]:
    return {"city": city, "celsius": 30}


@pytest.mark.parametrize("kind", ["EventStream", "Observable"])
def test_agent_loop_runs_a_bedrock_conversation_through_boto3(kind: str) -> None:
    tool = get_temperature if kind == "EventStream" else get_temperature_json
    with ReplayServer([load(TOOL_TURN), load(TEXT_TURN)]) as server:
        bedrock = client(server.root_url)

        def open_stream(messages: list[Any]) -> Any:
            stream = stream_of(bedrock, messages, toolConfig={"tools": TOOLS})
            return stream if kind == "EventStream" else rt.from_bedrock_stream(stream)

        events = (
            agent_loop(
                open_stream,
                {"get_temperature": tool},
                ASK,
                policy=rt.DEFAULT.with_tools(TOOLS),
            )
            .pipe(ops.to_list())
            .run()
        )
        requests = server.requests
    conversation = events[-1]
    assert isinstance(conversation, Conversation)
    assert conversation.turns == 2
    assert conversation.final.content == ANSWER
    assert conversation.final.finish_reason == "end_turn"
    first = assembled(load(TOOL_TURN))
    result = tool("Paris")
    answer = [{"text": result}] if isinstance(result, str) else [{"json": result}]
    asked = {"role": "user", "content": [{"toolResult": {"toolUseId": CALL_ID, "content": answer}}]}
    assert list(conversation.messages) == [
        *ASK,
        first.to_message(),
        asked,
        conversation.final.to_message(),
    ]
    # The second request is Converse's round trip, as the recorded one (PROVENANCE): the
    # toolUse block echoed back, then a user message with its toolResult.
    assert len(requests) == 2
    assert requests[0] == {"messages": ASK, "toolConfig": {"tools": TOOLS}}
    assert requests[1]["messages"] == as_sent([*ASK, first.to_message(), asked])
    use = requests[1]["messages"][1]["content"][1]["toolUse"]
    assert use == {"toolUseId": CALL_ID, "name": "get_temperature", "input": {"city": "Paris"}}
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(f.call.id, f.error) for f in finished] == [(CALL_ID, None)]
    assert [e.turn for e in events if isinstance(e, TurnFinished)] == [1, 2]


def test_a_throttled_turn_is_streamed_again_and_a_validation_error_is_not() -> None:
    throttled = [*load(TOOL_TURN)[:4], {"throttlingException": {"message": "slow down"}}]
    with ReplayServer([throttled, load(TOOL_TURN), load(TEXT_TURN)]) as server:
        bedrock = client(server.root_url)
        events = (
            agent_loop(
                lambda messages: stream_of(bedrock, messages),
                {"get_temperature": get_temperature},
                ASK,
                backoff=0.0,
            )
            .pipe(ops.to_list())
            .run()
        )
        assert [m["messages"] for m in server.requests[:2]] == [ASK, ASK]
    (retried,) = [e for e in events if isinstance(e, TurnRetried)]
    assert (retried.turn, retried.attempt) == (1, 1)
    assert isinstance(retried.error, rt.ProviderError)
    assert (retried.error.code, retried.error.retryable) == ("throttlingException", True)
    last = events[-1]
    assert isinstance(last, Conversation)
    assert last.final.content == ANSWER

    refused = [*load(TOOL_TURN)[:4], {"validationException": {"message": "bad input"}}]
    with ReplayServer([refused, load(TOOL_TURN)]) as server:
        bedrock = client(server.root_url)
        with pytest.raises(rt.ProviderError) as caught:
            agent_loop(
                lambda messages: stream_of(bedrock, messages),
                {"get_temperature": get_temperature},
                ASK,
                backoff=0.0,
            ).run()
        assert len(server.requests) == 1
    assert (caught.value.code, caught.value.retryable) == ("validationException", False)


def test_the_loop_resumes_a_bedrock_turn_that_lacks_its_answer() -> None:
    stopped = [*ASK, assembled(load(TOOL_TURN)).to_message()]
    with ReplayServer([load(TEXT_TURN)]) as server:
        bedrock = client(server.root_url)
        conversation = (
            agent_loop(
                lambda messages: stream_of(bedrock, messages),
                {"get_temperature": get_temperature},
                stopped,
            )
            .pipe(final_conversation())
            .run()
        )
        (request,) = server.requests
    answer = {
        "role": "user",
        "content": [{"toolResult": {"toolUseId": CALL_ID, "content": [{"text": "30°C"}]}}],
    }
    assert request["messages"] == as_sent([*stopped, answer])
    assert conversation.final.content == ANSWER


# -- transcripts -----------------------------------------------------------------------------------


def test_find_and_repair_a_bedrock_transcript() -> None:
    turn = assembled(load(TOOL_TURN))
    stopped = [*ASK, turn.to_message()]
    assert transcript_wire(stopped) == "bedrock"
    assert find_unanswered(stopped) == [(1, [CALL_ID])]
    assert repair_transcript(stopped) == ASK
    cancelled = {
        "toolResult": {"toolUseId": CALL_ID, "content": [{"text": CANCELLED}], "status": "error"}
    }
    repaired = repair_transcript(stopped, "cancel")
    assert repaired == [*stopped, {"role": "user", "content": [cancelled]}]
    assert find_unanswered(repaired) == []
    # The user's next words after the broken turn: the answer goes first in that message.
    words = {"role": "user", "content": [{"text": "and in Rome?"}]}
    repaired = repair_transcript([*stopped, words], "cancel")
    assert repaired == [*stopped, {"role": "user", "content": [cancelled, words["content"][0]]}]
    # A whole conversation is valid: unchanged by both modes.
    whole = [
        *stopped,
        *turn.tool_messages(["30°C"]),
        {"role": "assistant", "content": [{"text": ANSWER}]},
    ]
    assert find_unanswered(whole) == []
    assert repair_transcript(whole) == whole == repair_transcript(whole, "cancel")
    # botocore takes every repaired transcript.
    for messages in (repair_transcript(stopped, "cancel"), repaired, whole[:3]):
        assert sent(messages) == as_sent(messages)


def test_a_partly_answered_bedrock_turn_gets_its_missing_answer() -> None:
    turn = assembled(tool_use_events(("tu_a", "f", "{}"), ("tu_b", "g", "{}")))
    partial = {
        "role": "user",
        "content": [{"toolResult": {"toolUseId": "tu_a", "content": [{"text": "a"}]}}],
    }
    stopped = [*ASK, turn.to_message(), partial]
    assert find_unanswered(stopped) == [(1, ["tu_b"])]
    repaired = repair_transcript(stopped, "cancel")
    assert repaired[-1]["content"] == [
        partial["content"][0],
        {"toolResult": {"toolUseId": "tu_b", "content": [{"text": CANCELLED}], "status": "error"}},
    ]
    assert repair_transcript(stopped) == ASK
    assert sent(repaired) == as_sent(repaired)


def test_dropping_a_bedrock_turn_keeps_the_roles_alternating() -> None:
    stopped = [*ASK, assembled(load(TOOL_TURN)).to_message()]
    words = {"role": "user", "content": [{"text": "and in Rome?"}]}
    repaired = repair_transcript([*stopped, words])
    roles = [message["role"] for message in repaired]
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert repaired[-1]["content"][-1] == words["content"][0]


# -- declared tools --------------------------------------------------------------------------------


def test_with_tools_reads_converse_tool_specs() -> None:
    policy = rt.DEFAULT.with_tools(TOOLS)
    assert policy.tools == {"get_temperature": TOOLS[0]["toolSpec"]["inputSchema"]["json"]}
    with ReplayServer([load(TOOL_TURN)]) as server:
        stream = stream_of(client(server.root_url), toolConfig={"tools": TOOLS})
        turn = rt.from_bedrock_stream(stream).pipe(rt.assemble(policy)).run()
    assert [c.name for c in turn.tool_calls] == ["get_temperature"]


def test_a_tool_the_request_did_not_declare_is_unknown() -> None:
    others = [{"toolSpec": {"name": "get_capital", "inputSchema": {"json": {"type": "object"}}}}]
    with ReplayServer([load(TOOL_TURN)]) as server:
        bedrock = client(server.root_url)
        with pytest.raises(rt.UnknownToolError, match="get_capital"):
            rt.from_bedrock_stream(stream_of(bedrock)).pipe(
                rt.assemble(rt.DEFAULT.with_tools(others))
            ).run()
        # In the loop too: the model's output, never retried, no tool run.
        with pytest.raises(rt.UnknownToolError):
            agent_loop(
                lambda messages: stream_of(bedrock, messages),
                {"get_temperature": get_temperature},
                ASK,
                policy=rt.DEFAULT.with_tools(others),
            ).run()
        assert len(server.requests) == 2


def test_arguments_against_a_declared_schema_are_invalid() -> None:
    pytest.importorskip("jsonschema", reason=extra("schema"))
    numbered = [
        {
            "toolSpec": {
                "name": "get_temperature",
                "inputSchema": {
                    "json": {"type": "object", "properties": {"city": {"type": "integer"}}}
                },
            }
        }
    ]
    policy = replace(rt.DEFAULT.with_tools(numbered), validate_arguments=True)
    with pytest.raises(rt.InvalidArgumentsError, match=r"\$\.city"):
        assembled(load(TOOL_TURN), policy=policy)
