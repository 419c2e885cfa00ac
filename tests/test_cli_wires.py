"""The command line on the Responses, Anthropic and Gemini wires: replay, record, export, serve."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from rxtoolcalls.__main__ import EXIT_CODES, main
from tests.helpers import extra
from tests.wire_builders import (
    WIRE_FIXTURES,
    load_wire,
    load_wire_lines,
    sse_bytes,
    wire_fixture_names,
)

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

WIRED = [
    (wire, name)
    for wire in ("responses", "anthropic", "gemini")
    for name in wire_fixture_names(wire)
]
IDS = [f"{wire}/{name}" for wire, name in WIRED]


def expected(events: list[dict[str, Any]]) -> tuple[int, Any]:
    """The exit status and printed message the recorded dicts call for."""
    try:
        turn = reactivex.from_iterable(events).pipe(rt.assemble()).run()
    except rt.ToolCallStreamError as error:
        return next(code for kind, code in EXIT_CODES if isinstance(error, kind)), None
    return 0, json.loads(json.dumps(turn.to_message()))


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    out = io.StringIO()
    code = main(argv, out=out)
    err = capsys.readouterr().err
    return code, json.loads(out.getvalue()) if out.getvalue() else None, err


def assert_one_line_error(code: int, err: str) -> None:
    if code:
        assert len(err.strip().splitlines()) == 1
        assert err.startswith("rxtoolcalls: ")
        assert "Traceback" not in err


@pytest.mark.parametrize(("wire", "name"), WIRED, ids=IDS)
def test_replay_a_wire_capture_jsonl_and_sse(
    wire: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    want = expected(load_wire(wire, name))
    sse = tmp_path / "capture.sse"
    sse.write_bytes(sse_bytes(load_wire_lines(wire, name)))
    for path in (WIRE_FIXTURES / wire / f"{name}.jsonl", sse):
        code, message, err = run(["replay", "--json", str(path)], capsys)
        assert (code, message) == want
        assert_one_line_error(code, err)


@pytest.mark.parametrize(("wire", "name"), WIRED, ids=IDS)
def test_record_writes_a_capture_of_each_wire(
    wire: str,
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    events = load_wire(wire, name)
    want = expected(events)
    raw = sse_bytes(load_wire_lines(wire, name)).decode()
    monkeypatch.setattr(sys, "stdin", io.StringIO(raw))
    capture = tmp_path / "capture.jsonl"
    code, message, err = run(["record", str(capture)], capsys)
    assert (code, message) == want
    assert [json.loads(line) for line in capture.read_text("utf-8").splitlines()] == events
    assert f"recorded {len(events)} chunks" in err
    # The capture replays to the same answer.
    assert run(["replay", "--json", str(capture)], capsys)[:2] == want


@pytest.mark.parametrize(("wire", "name"), WIRED, ids=IDS)
def test_export_names_the_events_and_replays_the_same(
    wire: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = io.StringIO()
    assert main(["export", str(WIRE_FIXTURES / wire / f"{name}.jsonl")], out=out) == 0
    text = out.getvalue()
    events = load_wire(wire, name)
    named = 0 if wire == "gemini" else len(events)  # Gemini sends its data lines alone
    assert text.count("\nevent: ") + text.startswith("event: ") == named
    assert text.count("data: ") == len(events)
    assert "[DONE]" not in text
    exported = tmp_path / "exported.sse"
    exported.write_text(text, encoding="utf-8")
    assert run(["replay", "--json", str(exported)], capsys)[:2] == expected(events)


def test_a_flat_responses_error_event_in_raw_sse_is_a_provider_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {"event": "response.created", "data": {"type": "response.created", "response": {}}},
        {"event": "error", "data": {"type": "error", "code": "server_error", "message": "boom"}},
    ]
    sse = tmp_path / "flat.sse"
    sse.write_bytes(sse_bytes(lines))
    code, message, err = run(["replay", str(sse)], capsys)
    assert (code, message) == (9, None)
    assert "ProviderError" in err
    assert "boom" in err
    assert_one_line_error(code, err)


def test_a_chat_error_event_of_type_error_stays_a_provider_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]}
    sse = tmp_path / "chat.sse"
    sse.write_text(
        f"data: {json.dumps(chunk)}\n\n"
        'event: error\ndata: {"type": "error", "message": "x", "code": "server_error"}\n\n'
    )
    code, _, err = run(["replay", str(sse)], capsys)
    assert code == 9
    assert "ProviderError" in err


def test_read_jsonl_unwraps_recorded_events_only() -> None:
    from rxtoolcalls.sources import read_jsonl

    recorded = {"event": "ping", "data": {"type": "ping"}}
    unnamed = {"event": None, "data": {"type": "ping"}}
    other = {"event": "ping", "data": {"type": "ping"}, "id": 3}
    not_data = {"event": "ping", "data": "text"}
    lines = [json.dumps(x) for x in (recorded, unnamed, other, not_data)]
    assert list(read_jsonl(lines)) == [{"type": "ping"}, {"type": "ping"}, other, not_data]


def test_serve_answers_each_wire_at_its_path(tmp_path: Path) -> None:
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    openai = pytest.importorskip("openai", reason=extra("openai"))
    files = [
        WIRE_FIXTURES / "anthropic" / "openllmetry__text_then_parallel_tool_use.jsonl",
        WIRE_FIXTURES / "responses" / "pydantic-ai__single_call_get_capital.jsonl",
    ]
    command = [sys.executable, "-m", "rxtoolcalls", "serve", *map(str, files)]
    process = subprocess.Popen(
        [*command, "--port", "0", "--delay", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "(/v1/messages, /v1/responses)" in line
        base_url = line.strip().rsplit(" ", 1)[-1]
        claude = anthropic.Anthropic(
            base_url=base_url.removesuffix("/v1"), api_key="x", max_retries=0
        )
        stream = claude.messages.create(model="m", max_tokens=9, messages=[], stream=True)
        turn = rt.from_anthropic_stream(stream).pipe(rt.assemble()).run()
        assert [c.name for c in turn.tool_calls] == ["get_weather", "get_time"]
        gpt = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)
        stream = gpt.responses.create(model="m", input="hi", stream=True)
        turn = rt.from_openai_stream(stream).pipe(rt.assemble()).run()
        assert [c.name for c in turn.tool_calls] == ["get_capital"]
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def test_serve_answers_the_google_genai_client() -> None:
    genai = pytest.importorskip("google.genai", reason=extra("gemini"))
    from google.genai import types

    name = "vercel-ai__partial_args_parallel_and_no_args"
    command = [
        sys.executable,
        "-m",
        "rxtoolcalls",
        "serve",
        str(WIRE_FIXTURES / "gemini" / f"{name}.jsonl"),
    ]
    process = subprocess.Popen(
        [*command, "--port", "0", "--delay", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "(/v1beta/models/{model}:streamGenerateContent)" in line
        root = line.strip().rsplit(" ", 1)[-1].removesuffix("/v1")
        client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=root))
        stream = client.models.generate_content_stream(model="gemini-3-flash", contents="hi")
        turn = rt.from_gemini_stream(stream).pipe(rt.assemble()).run()
        assert [(c.name, c.arguments) for c in turn.tool_calls] == [
            ("read_theme", "{}"),
            ("read_screen", '{"id": "A"}'),
            ("read_screen", '{"id": "B"}'),
            ("read_screen", '{"id": "C"}'),
        ]
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
