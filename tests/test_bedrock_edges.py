"""The Bedrock wire at the replay server's edges, read by the real boto3 client on loopback.

``ReplayServer`` answers ConverseStream (``/model/{modelId}/converse-stream``, event-stream
frames), InvokeModelWithResponseStream (``/invoke-with-response-stream``, Anthropic events in
``chunk`` frames) and Converse (``/converse``, one reply). boto3 reads them as it reads Bedrock:
the same events, the same turns, exception frames as ``ProviderError``, a dropped connection
as ``StreamInterruptedError``; a dispose frees the socket. Every request is one log line (one
more when its client leaves early), never a traceback.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler

import rxtoolcalls as rt
from rxtoolcalls.serve import ReplayServer
from rxtoolcalls.sources import read_jsonl
from rxtoolcalls.wires import lookup
from tests.bedrock_helpers import (
    ASK,
    INVOKE,
    REDACTED,
    TOOL_TURN,
    assembled,
    aws,  # noqa: F401 - a fixture, used by name
    boto_shape,
    client,
    converse_names,
    load,
    stream_of,
    visible,
)
from tests.helpers import extra, open_sockets, settle

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = [pytest.mark.usefixtures("aws"), pytest.mark.json_parser]

CONVERSE = converse_names()
BOUND = 5.0  # seconds; what the tests wait for is seen in milliseconds
STILL = 30.0  # seconds between chunks for a server that should still be pacing when read


@pytest.fixture(autouse=True)
def no_traceback(capfd: pytest.CaptureFixture[str]) -> Iterator[None]:
    """The server's threads print nothing on stderr: no traceback, whatever the request."""
    yield
    assert "Traceback" not in capfd.readouterr().err


class Served:
    """A started ``ReplayServer``, its log lines and a boto3 client for it."""

    def __init__(self, recordings: list[list[dict[str, Any]]], **options: Any) -> None:
        self.log: list[str] = []
        self.server = ReplayServer(recordings, log=self.log.append, **options).start()
        self.bedrock = client(self.server.root_url)

    def close(self) -> None:
        self.server.stop()


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[Served] = []

    def start(recordings: list[list[dict[str, Any]]], **options: Any) -> Served:
        served = Served(recordings, **options)
        started.append(served)
        return served

    yield start
    for served in started:
        served.close()


def events_of(source: Any) -> list[Any]:
    got: list[Any] = rt.from_bedrock_stream(source).pipe(ops.to_list()).run()
    return got


def line(path: str, text: str) -> str:
    return f"127.0.0.1 POST {path} {text}"


# -- ConverseStream --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CONVERSE)
def test_converse_stream_gives_boto3_the_recorded_events_and_turn(serve: Any, name: str) -> None:
    recording = load(name)
    served = serve([recording])
    response = served.bedrock.converse_stream(modelId="m", messages=ASK)
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["content-type"] == "application/vnd.amazon.eventstream"
    # One frame an HTTP chunk, as Bedrock sends them (urllib3 waits for 64 KB otherwise).
    assert headers["transfer-encoding"] == "chunked"
    events = events_of(response["stream"])
    assert events == [boto_shape(event) for event in recording]
    # What the brief asks, as written: the stream assembled equals the recording assembled.
    turn = rt.from_bedrock_stream(stream_of(served.bedrock)).pipe(rt.assemble()).run()
    assert turn == assembled([boto_shape(event) for event in recording])
    # The recording's own dicts: the same turn but for usage members botocore does not know.
    assert visible(turn) == visible(assembled(recording))
    assert served.server.requests == [{"messages": ASK}, {"messages": ASK}]
    streamed = line("/model/m/converse-stream", f"200 recording 1/1, {len(recording)} chunks")
    assert served.log == [f"{streamed} streamed"] * 2


def test_a_paced_stream_reaches_boto3_frame_by_frame(serve: Any) -> None:
    # Each frame is sent as it is due: the first arrives while the server still waits to send
    # the second. Sent without chunks, boto3 read nothing before the body's end (or its read
    # timeout): urllib3 fills 64 KB first.
    recording = load(TOOL_TURN)
    served = serve([recording], delay=STILL)
    stream = stream_of(served.bedrock)
    first = next(iter(stream))
    assert first == boto_shape(recording[0])
    stream.close()
    assert settle(lambda: served.server.disconnects == 1, BOUND)
    assert settle(lambda: len(served.log) == 2, BOUND)
    assert served.log[1] == line(
        "/model/m/converse-stream",
        f"the client closed the connection after 1 of {len(recording)} chunks",
    )


@pytest.mark.parametrize("cut", [0, 1, 10, 25])
def test_a_dropped_connection_is_an_interruption(serve: Any, cut: int) -> None:
    recording = load(TOOL_TURN)
    assert len(recording) == 26
    served = serve([recording], cut={0: cut})
    seen: list[Any] = []
    with pytest.raises(rt.StreamInterruptedError) as caught:
        rt.from_bedrock_stream(stream_of(served.bedrock)).pipe(
            ops.do_action(seen.append), rt.assemble()
        ).run()
    # The body stops without its last chunk: urllib3 says so (ProtocolError), even at a
    # frame's end after messageStop, where a body cut without chunks would look whole.
    assert caught.value.__cause__ is not None
    assert seen == [boto_shape(event) for event in recording[:cut]]
    assert served.log == [
        line("/model/m/converse-stream", f"200 recording 1/1, {cut} chunks streamed")
        + ", then the connection dropped"
    ]


EXCEPTIONS = [
    ("throttlingException", True),
    ("serviceUnavailableException", True),
    ("internalServerException", True),
    ("modelStreamErrorException", True),
    ("validationException", False),
]


@pytest.mark.parametrize(("name", "retryable"), EXCEPTIONS)
def test_an_exception_event_reaches_boto3_as_an_exception_frame(
    serve: Any, name: str, retryable: bool
) -> None:
    recording = [*load(TOOL_TURN)[:5], {name: {"message": "slow down"}}]
    served = serve([recording])
    seen: list[Any] = []
    with pytest.raises(rt.ProviderError) as caught:
        rt.from_bedrock_stream(stream_of(served.bedrock)).pipe(
            ops.do_action(seen.append), rt.assemble()
        ).run()
    error = caught.value
    assert (error.code, error.retryable) == (name, retryable)
    assert "slow down" in str(error)
    assert type(error.__cause__).__name__ == "EventStreamError"  # botocore read the frame
    assert seen == [boto_shape(event) for event in recording[:5]]
    assert served.log == [line("/model/m/converse-stream", "200 recording 1/1, 6 chunks streamed")]


def test_an_exception_line_of_a_capture_is_the_exception_event(serve: Any) -> None:
    # The fixture README's line for an exception frame, read as boto3 would raise it.
    capture = (
        '{"event": "throttlingException", "data": {"message": "slow down"}, "exception": true}'
    )
    (event,) = read_jsonl([capture])
    assert event == {"throttlingException": {"message": "slow down"}}
    served = serve([[event]])  # alone: the stream fails before any event
    with pytest.raises(rt.ProviderError) as caught:
        events_of(stream_of(served.bedrock))
    assert (caught.value.code, caught.value.retryable) == ("throttlingException", True)


# -- InvokeModelWithResponseStream -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["anthropic events", "chunk envelopes"])
def test_invoke_model_stream_gives_boto3_the_anthropic_events(serve: Any, kind: str) -> None:
    inner = load(f"{INVOKE}.anthropic")
    recording = inner if kind == "anthropic events" else load(INVOKE)
    assert all(set(event) == {"chunk"} for event in load(INVOKE))
    served = serve([recording])
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 9, "messages": []}
    response = served.bedrock.invoke_model_with_response_stream(
        modelId="anthropic.claude-3-5-sonnet-20240620-v1:0", body=json.dumps(body)
    )
    assert response["ResponseMetadata"]["HTTPHeaders"]["transfer-encoding"] == "chunked"
    events = events_of(response["body"])
    assert events == inner
    turn = rt.from_bedrock_stream(
        served.bedrock.invoke_model_with_response_stream(modelId="m", body=b"{}")
    ).pipe(rt.assemble())
    got = turn.run()
    assert got == assembled(inner) == assembled(recording)
    assert got.wire == "anthropic"
    assert [c.name for c in got.tool_calls] == [
        "get_current_weather_info",
        "get_current_population_info",
    ]
    assert served.server.requests == [body, {}]
    # boto3 quotes the model id's colon in the path.
    path = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/invoke-with-response-stream"
    assert served.log[0] == line(path, f"200 recording 1/1, {len(recording)} chunks streamed")


def test_chunk_envelopes_at_the_anthropic_path_are_sent_as_their_events(serve: Any) -> None:
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    served = serve([load(INVOKE)])
    claude = anthropic.Anthropic(base_url=served.server.root_url, api_key="x", max_retries=0)
    stream = claude.messages.create(model="m", max_tokens=9, messages=[], stream=True)
    turn = rt.from_anthropic_stream(stream).pipe(rt.assemble()).run()
    assert turn == assembled(load(f"{INVOKE}.anthropic"))


def test_an_invoke_model_exception_event_is_an_exception_frame(serve: Any) -> None:
    events = [*load(f"{INVOKE}.anthropic")[:3], {"modelTimeoutException": {"message": "late"}}]
    served = serve([events])
    with pytest.raises(rt.ProviderError) as caught:
        rt.from_bedrock_stream(
            served.bedrock.invoke_model_with_response_stream(modelId="m", body=b"{}")
        ).pipe(rt.assemble()).run()
    assert (caught.value.code, caught.value.retryable) == ("modelTimeoutException", True)


# -- dispose ---------------------------------------------------------------------------------------

needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")


def sockets_now() -> frozenset[str]:
    gc.collect()
    return open_sockets()


@needs_proc
def test_dispose_mid_stream_closes_the_socket(serve: Any) -> None:
    recording = load("pydantic-ai__nova_text_for_cancel")
    served = serve([recording], delay=STILL)
    sockets = sockets_now()
    threads = set(threading.enumerate())
    stream = stream_of(served.bedrock)
    got = threading.Event()
    seen: list[Any] = []
    notes: list[object] = []

    def on_next(event: Any) -> None:
        seen.append(event)
        got.set()

    subscription = rt.from_bedrock_stream(stream).subscribe(
        on_next, notes.append, lambda: notes.append("completed"), scheduler=NewThreadScheduler()
    )
    assert got.wait(BOUND)
    # The client's end and the server's (both in this process), while the server paces.
    assert len(open_sockets() - sockets) == 2
    subscription.dispose()
    assert settle(lambda: not open_sockets() - sockets, BOUND), "a socket outlived the dispose"
    assert settle(lambda: served.server.disconnects == 1, BOUND)
    assert settle(lambda: set(threading.enumerate()) <= threads, BOUND)
    assert notes == []
    assert seen == [boto_shape(recording[0])]
    assert settle(lambda: len(served.log) == 2, BOUND)
    path = "/model/m/converse-stream"
    assert served.log == [
        line(path, f"200 recording 1/1, {len(recording)} chunks streamed"),
        line(path, f"the client closed the connection after 1 of {len(recording)} chunks"),
    ]


@needs_proc
def test_take_one_closes_the_socket(serve: Any) -> None:
    served = serve([load(TOOL_TURN)], delay=STILL)
    sockets = sockets_now()
    first = rt.from_bedrock_stream(stream_of(served.bedrock)).pipe(ops.take(1)).run()
    assert first == {"messageStart": {"role": "assistant"}}
    assert settle(lambda: not open_sockets() - sockets, BOUND), "a socket outlived take(1)"
    assert settle(lambda: served.server.disconnects == 1, BOUND)


# -- Converse (no stream) --------------------------------------------------------------------------


@pytest.mark.parametrize("name", CONVERSE)
def test_converse_answers_the_reply_the_recording_stands_for(serve: Any, name: str) -> None:
    recording = load(name)
    served = serve([recording])
    reply = served.bedrock.converse(modelId="m", messages=ASK)
    turn = assembled([boto_shape(event) for event in recording])
    # boto3 gives blobs back as bytes: the reply's message is the turn's, byte for byte.
    assert reply["output"]["message"] == turn.to_message()
    assert reply["stopReason"] == turn.finish_reason
    assert reply["usage"] == turn.usage
    assert "latencyMs" in reply["metrics"]
    assert served.log == [
        line("/model/m/converse", "200 recording 1/1, one reply (no stream: true)")
    ]


def test_converse_reply_of_redacted_reasoning_carries_base64(serve: Any) -> None:
    served = serve([load(REDACTED)])
    reply = served.bedrock.converse(modelId="m", messages=ASK)
    blocks = reply["output"]["message"]["content"]
    redacted = [b["reasoningContent"]["redactedContent"] for b in blocks if "reasoningContent" in b]
    recorded = [
        e["contentBlockDelta"]["delta"]["reasoningContent"]["redactedContent"]
        for e in load(REDACTED)
        if "reasoningContent" in e.get("contentBlockDelta", {}).get("delta", {})
    ]
    assert redacted == [base64.b64decode(text) for text in recorded]


@pytest.mark.parametrize(("name", "retryable"), [EXCEPTIONS[0], EXCEPTIONS[-1]])
def test_converse_of_an_exception_recording_keeps_its_exception(
    serve: Any, name: str, retryable: bool
) -> None:
    served = serve([[*load(TOOL_TURN)[:5], {name: {"message": "slow down"}}]])
    with pytest.raises(Exception) as caught:  # noqa: PT011 - botocore's ClientError
        served.bedrock.converse(modelId="m", messages=ASK)
    typed = lookup("bedrock").sdk_error(caught.value)
    assert isinstance(typed, rt.ProviderError)
    assert "slow down" in str(typed)
    assert (typed.code, typed.retryable) == (name[0].upper() + name[1:], retryable)


def test_converse_of_an_exception_recording_is_a_provider_error(serve: Any) -> None:
    # What holds today: a typed error with the provider's words, one log line.
    served = serve([[*load(TOOL_TURN)[:5], {"throttlingException": {"message": "slow down"}}]])
    with pytest.raises(Exception) as caught:  # noqa: PT011 - botocore's ClientError
        served.bedrock.converse(modelId="m", messages=ASK)
    typed = lookup("bedrock").sdk_error(caught.value)
    assert isinstance(typed, rt.ProviderError)
    assert "slow down" in str(typed)
    assert served.log == [line("/model/m/converse", "502 recording 1/1, ProviderError")]


# -- misuse: one log line, a typed answer ----------------------------------------------------------


def client_error(call: Any) -> tuple[str, str, int]:
    """Botocore's ``ClientError`` of a call: its code, message and HTTP status."""
    with pytest.raises(Exception) as caught:  # noqa: PT011 - botocore's ClientError
        call()
    response: Any = getattr(caught.value, "response", {})
    said = response["Error"]
    return said["Code"], said["Message"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_a_recording_at_another_wires_path_names_where_it_is_served(serve: Any) -> None:
    served = serve([load(TOOL_TURN), load(INVOKE)])
    invoke = served.bedrock.invoke_model_with_response_stream
    code, message, status = client_error(lambda: invoke(modelId="m", body=b"{}"))
    assert (code, status) == ("ValidationException", 400)
    assert message == (
        "recording 1 is a bedrock stream, served at /model/{modelId}/converse-stream or "
        "/model/{modelId}/converse, not at /model/{modelId}/invoke-with-response-stream"
    )
    code, message, status = client_error(lambda: stream_of(served.bedrock))
    assert (code, status) == ("ValidationException", 400)
    assert message == (
        "recording 2 is an anthropic stream, served at /v1/messages or "
        "/model/{modelId}/invoke-with-response-stream, not at /model/{modelId}/converse-stream"
    )
    assert len(served.log) == 2
    assert all(" 400 recording " in entry for entry in served.log)


@pytest.mark.parametrize(
    ("recording", "route", "said"),
    [
        (
            [{"messageStart": {"role": "assistant"}}, {"messageStop": {}, "metadata": {}}],
            "converse-stream",
            "chunk 2 cannot be sent as eventstream: ValueError",
        ),
        (
            [{"type": "message_start", "message": {}}, {"chunk": {"bytes": 5}}],
            "invoke-with-response-stream",
            "chunk 2 cannot be sent as eventstream: MalformedChunkError",
        ),
        (
            [
                {"messageStart": {"role": "assistant"}},
                {"messageStop": {"stopReason": "end_turn"}},
                {"metadata": {"metrics": {"latencyMs": {1, 2}}}},  # no JSON holds a set
            ],
            "converse",
            "no reply: TypeError",
        ),
    ],
)
def test_a_recording_the_route_cannot_send_is_a_500_and_one_line(
    serve: Any, recording: list[dict[str, Any]], route: str, said: str
) -> None:
    served = serve([recording])
    calls = {
        "converse-stream": lambda: events_of(stream_of(served.bedrock)),
        "invoke-with-response-stream": lambda: served.bedrock.invoke_model_with_response_stream(
            modelId="m", body=b"{}"
        ),
        "converse": lambda: served.bedrock.converse(modelId="m", messages=ASK),
    }
    _, message, status = client_error(calls[route])
    assert status == 500
    assert said in message
    (entry,) = served.log
    assert entry.startswith(line(f"/model/m/{route}", f"500 recording 1/1: {said}"))


def test_an_envelope_that_cannot_be_read_shows_no_wire_and_is_served(serve: Any) -> None:
    # It raised MalformedChunkError from the constructor (a traceback from the serve command).
    served = serve([[{"chunk": {"bytes": 5}}]])
    assert served.server.wires == [None]
    invoke = served.bedrock.invoke_model_with_response_stream
    _, message, status = client_error(lambda: invoke(modelId="m", body=b"{}"))
    assert status == 500
    assert "chunk 1 cannot be sent as eventstream: MalformedChunkError" in message
    assert len(served.log) == 1


def test_every_request_is_one_log_line(serve: Any) -> None:
    tool_turn = load(TOOL_TURN)
    recordings = [
        tool_turn,
        load(f"{INVOKE}.anthropic"),
        tool_turn,
        [*tool_turn[:3], {"validationException": {"message": "no"}}],
        tool_turn,
    ]
    served = serve(recordings, cut={2: 4})
    bedrock = served.bedrock
    events_of(stream_of(bedrock))
    events_of(bedrock.invoke_model_with_response_stream(modelId="m", body=b"{}"))
    with pytest.raises(rt.StreamInterruptedError):
        rt.from_bedrock_stream(stream_of(bedrock)).pipe(rt.assemble()).run()
    with pytest.raises(rt.ProviderError):
        events_of(stream_of(bedrock))
    bedrock.converse(modelId="m", messages=ASK)
    assert settle(lambda: len(served.log) == 5, BOUND)
    assert [entry.split(" ", 4)[3] for entry in served.log] == ["200"] * 5
    assert [entry.split(" ")[2] for entry in served.log] == [
        "/model/m/converse-stream",
        "/model/m/invoke-with-response-stream",
        "/model/m/converse-stream",
        "/model/m/converse-stream",
        "/model/m/converse",
    ]
