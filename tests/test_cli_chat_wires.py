"""``chat --wire``: the agent loop through each wire's SDK against the replay server."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from rxtoolcalls.__main__ import main
from rxtoolcalls.serve import ReplayServer
from rxtoolcalls.wires import names
from tests.bedrock_helpers import aws  # noqa: F401 - a fixture, used by name
from tests.helpers import extra
from tests.test_cli_help import _commands
from tests.wire_builders import case

# The SDK each wire's test needs (installed by the test extra).
SDK = {"chat": "openai", "responses": "openai", "anthropic": "anthropic", "gemini": "google.genai"}
EXTRA = {"chat": "openai", "responses": "openai", "anthropic": "anthropic", "gemini": "gemini"}


def _url(server: ReplayServer, wire: str) -> str:
    # The OpenAI SDK takes the address with /v1; the others add their own prefix.
    return server.base_url if SDK.get(wire) == "openai" else server.root_url


def test_the_wire_choices_are_the_registry_s() -> None:
    [wire] = [action for action in _commands()["chat"]._actions if action.dest == "wire"]
    assert tuple(wire.choices or ()) == names()
    assert wire.default == "chat"


@pytest.mark.parametrize("wire", names())
@pytest.mark.usefixtures("aws")
def test_chat_runs_a_tool_round_on_each_wire(
    wire: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip(SDK.get(wire, "boto3"), reason=extra(EXTRA.get(wire, "bedrock")))
    tools = tmp_path / "tools.py"
    tools.write_text('def lookup(term):\n    """Look a term up."""\n    return term.upper()\n')
    asked = case(wire).turn(calls=[("call_1", "lookup", ['{"term": ', '"oslo"}'])])
    answer = case(wire).turn(["Found ", "it."])
    record = tmp_path / "turn.jsonl"
    with ReplayServer([asked, answer]) as server:
        out = io.StringIO()
        code = main(
            [
                "chat",
                "Where?",
                "--wire",
                wire,
                "--base-url",
                _url(server, wire),
                "--model",
                "m",
                "--system",
                "Be brief.",
                "--python",
                f"{tools}:lookup",
                "--max-tokens",
                "64",
                "--record",
                str(record),
            ],
            out=out,
        )
    err = capsys.readouterr().err
    assert (code, out.getvalue().strip()) == (0, "Found it."), err
    first, second = (json.dumps(request) for request in server.requests)
    for sent in (first, second):
        assert '"lookup"' in sent  # the tool is declared in the wire's shape
        assert "Be brief." in sent
        assert "Where?" in sent
        assert "64" in sent
    assert "OSLO" in second  # the tool's answer went back
    assert record.exists()
    assert record.with_suffix(".turn2.jsonl").exists()


@pytest.mark.parametrize("wire", names())
def test_a_missing_sdk_names_the_extra(
    wire: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    top = SDK.get(wire, "boto3")
    for module in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, top, None)
    out = io.StringIO()
    argv = ["chat", "Hi?", "--wire", wire, "--base-url", "http://127.0.0.1:9", "--model", "m"]
    assert main(argv, out=out) == 2
    extra = EXTRA.get(wire, "bedrock")
    pip = {"google.genai": "google-genai"}.get(top, top)
    assert capsys.readouterr().err == (
        f"rxtoolcalls: chat --wire {wire} needs the {pip} SDK: pip install 'rxtoolcalls[{extra}]'\n"
    )


def test_bedrock_has_no_tool_choice_none(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["chat", "Hi?", "--wire", "bedrock", "--base-url", "http://127.0.0.1:9", "--model", "m"]
    assert main([*argv, "--tool-choice", "none"], out=io.StringIO()) == 2
    assert capsys.readouterr().err == (
        "rxtoolcalls: --tool-choice none: bedrock has no such mode (auto, required or a "
        "declared tool's name)\n"
    )


@pytest.mark.parametrize("wire", names())
@pytest.mark.usefixtures("aws")
def test_a_forced_tool_reaches_each_wire(wire: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip(SDK.get(wire, "boto3"), reason=extra(EXTRA.get(wire, "bedrock")))
    with ReplayServer([case(wire).turn(["Fine."])]) as server:
        out = io.StringIO()
        argv = ["chat", "Hi?", "--wire", wire, "--base-url", _url(server, wire), "--model", "m"]
        code = main([*argv, "--python", "json:dumps", "--tool-choice", "dumps"], out=out)
    assert (code, out.getvalue().strip()) == (0, "Fine."), capsys.readouterr().err
    [request] = server.requests
    sent = json.dumps({k: v for k, v in request.items() if "tool" in k.lower() or k == "config"})
    assert sent.count('"dumps"') >= 2, request  # declared, and chosen


@pytest.mark.parametrize("wire", names())
def test_a_base_url_that_is_no_address_is_one_line(
    wire: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["chat", "Hi?", "--wire", wire, "--base-url", "localhost:8765", "--model", "m"]
    assert main(argv, out=io.StringIO()) == 2
    assert capsys.readouterr().err == (
        "rxtoolcalls: --base-url localhost:8765: expected an http:// or https:// address\n"
    )


@pytest.mark.usefixtures("aws")
def test_bedrock_without_an_endpoint_needs_a_region_and_credentials(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip(
        "boto3", reason="needs the bedrock extra: pip install 'rxtoolcalls[bedrock]'"
    )
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    argv = ["chat", "Hi?", "--wire", "bedrock", "--model", "m"]
    assert main(argv, out=io.StringIO()) == 2
    assert capsys.readouterr().err == (
        "rxtoolcalls: chat --wire bedrock: no AWS region: set AWS_DEFAULT_REGION (or give "
        "--base-url)\n"
    )
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    assert main(argv, out=io.StringIO()) == 2
    assert capsys.readouterr().err == (
        "rxtoolcalls: chat --wire bedrock: no AWS credentials: set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE\n"
    )
