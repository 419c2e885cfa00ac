"""The command line on Bedrock captures: replay, export (event-stream bytes), record, serve.

In process through ``main(argv, out)`` (stderr read with ``capsys``), but for ``serve``, which
runs until interrupted: one real subprocess, read by the real boto3 client. Every misuse is one
line on stderr and an exit status, never a traceback.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.__main__ import main
from rxtoolcalls.serve import ReplayServer
from rxtoolcalls.sources import read_jsonl, record
from tests.bedrock_helpers import (
    BEDROCK,
    INVOKE,
    REDACTED,
    TOOL_TURN,
    assembled,
    aws,  # noqa: F401 - a fixture, used by name
    client,
    converse_names,
    load,
    stream_of,
    without_padding,
)

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

CONVERSE = converse_names()
CAPTURES = [*CONVERSE, INVOKE, f"{INVOKE}.anthropic"]


def printed(value: Any) -> Any:
    """A message as the command line prints it: JSON, blobs as the base64 the wire carries."""

    def blob(b: object) -> str:
        assert isinstance(b, bytes)
        return base64.b64encode(b).decode("ascii")

    return json.loads(json.dumps(value, default=blob))


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def run_binary(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, bytes, str]:
    """As ``run``, with a stdout that has a binary ``buffer``, as ``sys.stdout`` does."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    code = main(argv, out=out)
    out.flush()
    return code, raw.getvalue(), capsys.readouterr().err


def one_line(err: str) -> str:
    assert "Traceback" not in err
    (said,) = err.strip().splitlines()
    assert said.startswith("rxtoolcalls: ")
    return said


def capture(tmp_path: Path, events: list[Any], name: str = "capture.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return str(path)


def decoded(body: bytes) -> list[Any]:
    """The events of event-stream bytes, a chunk's bytes parsed (JSON spacing aside)."""
    got: list[Any] = rt.from_eventstream(body).pipe(ops.to_list()).run()
    return [parsed(event) for event in got]


def parsed(event: dict[str, Any]) -> dict[str, Any]:
    if set(event) == {"chunk"}:
        return {"chunk": {**event["chunk"], "bytes": json.loads(event["chunk"]["bytes"])}}
    return event


def framed(event: dict[str, Any]) -> dict[str, Any]:
    """A recorded event as a frame decoder yields it: no ``p``, known blobs as bytes."""
    ((name, body),) = without_padding(event).items()
    reasoning = body.get("delta", {}).get("reasoningContent", {})
    if isinstance(reasoning.get("redactedContent"), str):
        blob = base64.b64decode(reasoning["redactedContent"])
        body = {**body, "delta": {"reasoningContent": {**reasoning, "redactedContent": blob}}}
    if name == "chunk":
        return parsed({name: {**body, "bytes": base64.b64decode(body["bytes"])}})
    return {name: body}


# -- replay ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CAPTURES)
def test_replay_prints_the_assembled_message(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["replay", "--json", str(BEDROCK / f"{name}.jsonl")], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out) == printed(assembled(load(name)).to_message())


def test_replay_prints_a_redacted_reasoning_as_its_base64(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The blob is bytes in the turn; printing it raised TypeError (a traceback, status 1).
    code, out, err = run(["replay", "--json", str(BEDROCK / f"{REDACTED}.jsonl")], capsys)
    assert (code, err) == (0, "")
    blocks = json.loads(out)["content"]
    recorded = [
        e["contentBlockDelta"]["delta"]["reasoningContent"]["redactedContent"]
        for e in load(REDACTED)
        if "reasoningContent" in e.get("contentBlockDelta", {}).get("delta", {})
    ]
    assert [b["reasoningContent"]["redactedContent"] for b in blocks[:2]] == recorded


def test_replay_of_a_broken_chunk_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = capture(tmp_path, [{"event": "chunk", "data": {"bytes": 5}}])
    code, out, err = run(["replay", path], capsys)
    assert (code, out) == (3, "")
    assert "MalformedChunkError" in one_line(err)


# -- export ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*CONVERSE, INVOKE])
@pytest.mark.parametrize("to", [[], ["--to", "eventstream"]], ids=["default", "eventstream"])
def test_export_writes_event_stream_bytes_that_decode_to_the_events(
    name: str, to: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, body, err = run_binary(["export", str(BEDROCK / f"{name}.jsonl"), *to], capsys)
    assert (code, err) == (0, "")
    events = load(name)
    assert decoded(body) == [framed(event) for event in events]
    recorded = BEDROCK / f"{name}.eventstream"
    if recorded.exists():
        # What Bedrock sent, byte for byte, decodes to the same events.
        assert decoded(body) == decoded(recorded.read_bytes())
    turn = rt.from_eventstream(body).pipe(rt.assemble()).run()
    assert turn == assembled(events)


def test_export_of_the_invoke_model_capture_is_its_chunk_frames(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, body, _ = run_binary(["export", str(BEDROCK / f"{INVOKE}.jsonl")], capsys)
    assert code == 0
    inner = [event["chunk"]["bytes"] for event in decoded(body)]
    assert inner == load(f"{INVOKE}.anthropic")


@pytest.mark.parametrize("name", [TOOL_TURN, INVOKE])
def test_export_of_a_bedrock_capture_to_sse_is_a_usage_error(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["export", str(BEDROCK / f"{name}.jsonl"), "--to", "sse"], capsys)
    assert (code, out) == (2, "")
    assert one_line(err) == (
        "rxtoolcalls: export: a bedrock capture is framed as eventstream, not sse"
    )


def test_export_to_eventstream_needs_a_capture_framed_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anthropic = str(BEDROCK / f"{INVOKE}.anthropic.jsonl")
    wireless = capture(tmp_path, [{"error": {"message": "busy"}}])
    for path, said in [
        (anthropic, "an anthropic capture is framed as sse, not eventstream"),
        # Before, it wrote SSE text as if it were event-stream bytes.
        (wireless, "a capture that shows no wire is framed as sse, not eventstream"),
    ]:
        code, body, err = run_binary(["export", path, "--to", "eventstream"], capsys)
        assert (code, body) == (2, b"")
        assert one_line(err) == f"rxtoolcalls: export: {said}"


def test_export_of_event_stream_bytes_to_a_text_stdout_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(["export", str(BEDROCK / f"{TOOL_TURN}.jsonl")], capsys)
    assert (code, out) == (2, "")
    assert "binary stdout" in one_line(err)


@pytest.mark.parametrize(
    ("events", "said"),
    [
        (
            [{"messageStart": {"role": "assistant"}}, {"messageStop": {}, "metadata": {}}],
            "chunk 2: MalformedChunkError: it cannot be framed as eventstream (ValueError",
        ),
        (
            [{"chunk": {"bytes": base64.b64encode(b'{"type": "ping"}').decode()}}, {"chunk": {}}],
            "chunk 2: MalformedChunkError: an InvokeModel chunk's bytes must be bytes",
        ),
    ],
)
def test_export_of_a_chunk_the_wire_cannot_frame_is_one_line(
    events: list[Any], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, body, err = run_binary(["export", capture(tmp_path, events)], capsys)
    assert (code, body) == (3, b"")
    assert one_line(err).startswith(f"rxtoolcalls: {said}")


@pytest.mark.parametrize("name", [TOOL_TURN, REDACTED, INVOKE])
def test_export_to_jsonl_reads_back_as_the_same_capture(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["export", str(BEDROCK / f"{name}.jsonl"), "--to", "jsonl"], capsys)
    assert (code, err) == (0, "")
    assert list(read_jsonl(out.splitlines())) == load(name)
    again = tmp_path / "again.jsonl"
    again.write_text(out, encoding="utf-8")
    want = run(["replay", "--json", str(BEDROCK / f"{name}.jsonl")], capsys)
    assert run(["replay", "--json", str(again)], capsys) == want


# -- record ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("aws")
def test_record_of_a_boto3_stream_keeps_blobs_as_base64_and_replays_the_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "redacted.jsonl"
    with ReplayServer([load(REDACTED)]) as server:
        stream = stream_of(client(server.root_url))
        turn = rt.from_bedrock_stream(stream).pipe(record(path), rt.assemble()).run()
    blobs = [
        block["reasoningContent"]["redactedContent"]
        for block in turn.to_message()["content"]
        if "reasoningContent" in block
    ]
    assert len(blobs) == 2
    assert all(isinstance(blob, bytes) for blob in blobs)  # boto3 decoded them
    text = path.read_text(encoding="utf-8")
    for blob in blobs:
        assert json.dumps(base64.b64encode(blob).decode("ascii")) in text
    assert assembled(list(read_jsonl(path))) == turn
    code, out, err = run(["replay", "--json", str(path)], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out) == printed(turn.to_message())


def test_record_command_on_a_bedrock_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = str(BEDROCK / f"{TOOL_TURN}.jsonl")
    target = str(tmp_path / "out.jsonl")
    code, out, err = run(["record", target, source], capsys)
    assert code == 0
    assert err.splitlines() == [f"recorded 26 chunks to {target}"]
    assert list(read_jsonl(target)) == load(TOOL_TURN)
    assert json.loads(out) == printed(assembled(load(TOOL_TURN)).to_message())


# -- serve -----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("aws")
def test_serve_answers_boto3_at_the_bedrock_paths() -> None:
    files = [str(BEDROCK / f"{TOOL_TURN}.jsonl"), str(BEDROCK / f"{INVOKE}.jsonl")]
    process = subprocess.Popen(
        [sys.executable, "-m", "rxtoolcalls", "serve", *files, "--port", "0", "--delay", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        said = process.stdout.readline()
        assert said.startswith("serving 2 recording(s) (/model/{modelId}/converse-stream, ")
        assert "/model/{modelId}/invoke-with-response-stream) at http://127.0.0.1:" in said
        base_url = said.strip().rsplit(" ", 1)[-1]
        # The address printed ends in /v1; boto3 puts its own path after it, which ends the same.
        bedrock = client(base_url.removesuffix("/v1"))
        turn = rt.from_bedrock_stream(stream_of(bedrock)).pipe(rt.assemble()).run()
        assert turn == assembled(load(TOOL_TURN))
        stream = client(base_url).invoke_model_with_response_stream(modelId="m", body=b"{}")
        turn = rt.from_bedrock_stream(stream).pipe(rt.assemble()).run()
        assert turn == assembled(load(f"{INVOKE}.anthropic"))
    finally:
        process.terminate()
        _, err = process.communicate(timeout=10)
    assert "Traceback" not in err
    assert err.splitlines() == [
        "127.0.0.1 POST /model/m/converse-stream 200 recording 1/2, 26 chunks streamed",
        "127.0.0.1 POST /v1/model/m/invoke-with-response-stream 200 recording 2/2, "
        "28 chunks streamed",
    ]


# -- raw event-stream bodies as captures -------------------------------------------------------

RAW = sorted(path.stem for path in BEDROCK.glob("*.eventstream"))


@pytest.mark.parametrize("name", RAW)
def test_replay_reads_a_raw_event_stream_body_as_its_jsonl(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = run(["replay", "--json", str(BEDROCK / f"{name}.eventstream")], capsys)
    lines = run(["replay", "--json", str(BEDROCK / f"{name}.jsonl")], capsys)
    assert raw[0] == lines[0] == 0, raw[2]
    assert raw[1] == lines[1]


def test_record_reads_a_raw_event_stream_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "recorded.jsonl"
    source = str(BEDROCK / f"{TOOL_TURN}.eventstream")
    code, _, err = run(["record", str(target), source], capsys)
    assert code == 0, err
    assert assembled(list(read_jsonl(target))) == assembled(load(TOOL_TURN))


@pytest.mark.parametrize("cut", [5, 100, 700])
def test_a_cut_raw_body_is_one_line_and_its_status(
    cut: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cut.eventstream"
    path.write_bytes((BEDROCK / f"{TOOL_TURN}.eventstream").read_bytes()[:cut])
    code, out, err = run(["replay", str(path)], capsys)
    assert code != 0
    assert out == ""
    said = one_line(err)
    # Under a prelude the file is no event stream: bytes that are not a capture.
    assert ("StreamInterruptedError" in said) if cut >= 12 else ("binary file" in said)
    # No switch of the command helps a body cut inside a frame.
    assert "--no-require-finish-reason" not in said
