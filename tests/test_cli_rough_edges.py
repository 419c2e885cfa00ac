"""Rough edges a new user hit: chat's connection error, files without events, ``--python``
paths, the pacing options and ``--json``, and the article before a wire's name.

In process through ``main(argv, out)``; stderr read with ``capsys``.
"""

from __future__ import annotations

import io
import json
import re
import socket
import sys
import time
from pathlib import Path

import pytest

import rxtoolcalls.__main__ as cli
from rxtoolcalls.__main__ import main
from rxtoolcalls._errors import a_or_an as _a
from rxtoolcalls.serve import ReplayServer
from tests.helpers import FIXTURES, extra
from tests.test_cli_help import _commands
from tests.wire_builders import case

NO_FINISH = str(FIXTURES / "snowflake__cortex_no_finish_reason.jsonl")
PARALLEL = str(FIXTURES / "openai__parallel_tool_calls.jsonl")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def one_line(err: str) -> str:
    assert "Traceback" not in err
    (said,) = err.strip().splitlines()
    assert said.startswith(
        ("rxtoolcalls: ", "rxtoolcalls replay: ", "rxtoolcalls serve: ", "rxtoolcalls chat: ")
    )
    return said


# -- 1. chat against nothing -----------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("retries", ["0", "1"])
def test_chat_against_nothing_names_the_url_and_gives_one_hint(
    retries: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("openai", reason=extra("openai"))
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    argv = ["chat", "Hi?", "--base-url", url, "--model", "m", "--retries", retries]
    code, out, err = run(argv, capsys)
    assert (code, out) == (4, "")
    said = one_line(err)
    tries = "tried once" if retries == "0" else "tried 2 times"
    assert said == (
        f"rxtoolcalls: StreamInterruptedError: cannot connect to {url} "
        f"(ConnectionRefusedError: Connection refused; {tries}) "
        f"— is a server listening at {url}?"
    )


def test_chat_spent_retries_say_so_instead_of_advising_a_retry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("openai", reason=extra("openai"))
    answer = case("chat").turn(["All good."])
    with ReplayServer([answer], cut={0: 0, 1: 0}) as server:
        argv = ["chat", "Hi?", "--base-url", server.base_url, "--model", "m", "--retries", "1"]
        code, _, err = run(argv, capsys)
    assert code == 4
    said = one_line(err)
    assert said.count("nothing was emitted") <= 1
    assert "retry the request" not in said
    assert said.endswith("— tried 2 times: raise --retries to try more")


# -- 2. a file with no stream events -----------------------------------------------------------

NOT_CAPTURES = {
    "empty.jsonl": ("", "empty.jsonl holds no events: nothing to assemble"),
    "blank.sse": (": keep-alive\n\n", "blank.sse holds no events: nothing to assemble"),
    "messages.jsonl": (
        '{"role": "user", "content": "hi"}\n{"role": "user"}\n',
        "no event of messages.jsonl is a stream event of any wire "
        "(the first holds the keys content, role)",
    ),
}


@pytest.mark.json_parser
@pytest.mark.parametrize("name", NOT_CAPTURES)
@pytest.mark.parametrize("command", ["replay", "record"])
def test_a_file_without_stream_events_says_what_it_lacks(
    name: str,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text, lacks = NOT_CAPTURES[name]
    (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    argv = ["replay", name] if command == "replay" else ["record", "out.jsonl", name]
    code, out, err = run(argv, capsys)
    assert (code, out) == (4, "")
    if command == "record":
        recorded, err = err.split("\n", 1)
        assert recorded.startswith("recorded ")
    said = one_line(err)
    assert said.startswith(f"rxtoolcalls: StreamInterruptedError: {lacks}")
    assert "--" not in said  # no option of the command makes such a file a turn
    for option in (["--no-require-finish-reason"], ["--policy", "lenient"]):
        again = run([*argv, *option, *(["--force"] if command == "record" else [])], capsys)
        assert again[0] == 4


def _options(said: str) -> list[list[str]]:
    """Every option a line suggests, as arguments to add."""
    return [found.split() for found in re.findall(r"--policy lenient|--[a-z][a-z-]+", said)]


@pytest.mark.json_parser
@pytest.mark.parametrize(
    "capture",
    [*NOT_CAPTURES, "no_finish.jsonl", "cut.jsonl"],
)
def test_following_a_hint_never_leads_back_to_the_same_error(
    capture: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / capture
    if capture in NOT_CAPTURES:
        path.write_text(NOT_CAPTURES[capture][0], encoding="utf-8")
    elif capture == "no_finish.jsonl":
        path.write_text(Path(NO_FINISH).read_text(encoding="utf-8"), encoding="utf-8")
    else:
        lines = Path(PARALLEL).read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join(lines[:5]) + "\n", encoding="utf-8")
    code, _, err = run(["replay", str(path)], capsys)
    assert code != 0
    said = one_line(err)
    for option in _options(said):
        again = run(["replay", str(path), *option], capsys)
        assert again[0] == 0 or one_line(again[2]) != said, option


# -- 4. --python with a file path ----------------------------------------------------------------


def test_python_tool_from_a_file_path_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("openai", reason=extra("openai"))
    tools = tmp_path / "my tools.py"
    tools.write_text('def lookup(term):\n    """Look a term up."""\n    return term.upper()\n')
    asked = case("chat").turn(calls=[("call_1", "lookup", ['{"term": ', '"oslo"}'])])
    with ReplayServer([asked, case("chat").turn(["Found."])]) as server:
        argv = ["chat", "Hi?", "--base-url", server.base_url, "--model", "m"]
        code, out, err = run([*argv, "--python", f"{tools}:lookup"], capsys)
    assert (code, out.strip()) == (0, "Found."), err
    [tool] = server.requests[0]["tools"]
    assert tool["function"]["name"] == "lookup"
    assert server.requests[1]["messages"][-1]["content"] == "OSLO"


@pytest.mark.parametrize(
    ("source", "spec", "said"),
    [
        (None, "{dir}/missing.py:f", "--python {dir}/missing.py:f: no such file {dir}/missing.py"),
        (
            "x = 1\n",
            "{dir}/tools.py:f",
            "--python {dir}/tools.py:f: {dir}/tools.py has no attribute 'f'",
        ),
        (
            "raise ValueError('no config')\n",
            "{dir}/tools.py:f",
            "--python {dir}/tools.py:f: importing {dir}/tools.py raised ValueError: no config",
        ),
        (
            "x = 1\n",
            "{dir}/tools.py:x",
            "--python {dir}/tools.py:x: {dir}/tools.py:x is not callable",
        ),
        (
            "def f(:\n",
            "{dir}/tools.py:f",
            "--python {dir}/tools.py:f: importing {dir}/tools.py raised SyntaxError: ",
        ),
    ],
)
def test_python_tool_file_errors_are_one_line(
    source: str | None,
    spec: str,
    said: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if source is not None:
        (tmp_path / "tools.py").write_text(source)
    argv = ["chat", "Hi?", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    code, out, err = run([*argv, "--python", spec.format(dir=tmp_path)], capsys)
    assert (code, out) == (2, "")
    assert one_line(err).startswith("rxtoolcalls: " + said.format(dir=tmp_path))


def test_a_tool_file_does_not_shadow_a_module_of_the_same_name(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text("def f():\n    return 1\n")
    name, function = cli._python_tool(f"{tmp_path / 'json.py'}:f")
    assert (name, function()) == ("f", 1)
    assert sys.modules["json"] is json


# -- 6. pacing and --json -------------------------------------------------------------------


def _sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


@pytest.mark.json_parser
@pytest.mark.parametrize(
    ("options", "pace"),
    [
        ([], None),
        (["--speed", "2"], 0.02),
        (["--speed", "0.5"], 0.08),
        (["--delay", "0.005"], 0.005),
        (["--delay", "0"], None),
        (["--speed", "inf"], None),
    ],
)
def test_the_pacing_options_do_what_they_say(
    options: list[str],
    pace: float | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    slept = _sleeps(monkeypatch)
    code, _, _ = run(["replay", PARALLEL, *options], capsys)
    assert code == 0
    if pace is None:
        assert slept == []
    else:
        assert slept
        assert all(s == pytest.approx(pace) for s in slept)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            ["--speed", "0"],
            "argument --speed: 0 would never play a chunk: for no pacing leave --speed out "
            "(or give --delay 0)",
        ),
        (["--speed", "-1"], "argument --speed: must be above 0: '-1'"),
        (["--delay", "-1"], "argument --delay: must be at least 0: '-1'"),
        (["--speed", "2", "--delay", "0"], "argument --delay: not allowed with argument --speed"),
    ],
)
def test_a_misleading_pace_is_refused_in_one_line(
    options: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["replay", PARALLEL, *options], out=io.StringIO())
    assert exited.value.code == 2
    assert said in one_line(capsys.readouterr().err)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.json_parser
def test_json_only_quiets_stderr_stdout_is_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outputs = []
    for json_flag in ([], ["--json"]):
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        out = io.StringIO()
        assert main(["replay", PARALLEL, *json_flag], out=out) == 0
        outputs.append((out.getvalue(), terminal.getvalue()))
    (plain, summary), (quiet, nothing) = outputs
    assert plain == quiet
    assert "✓ 2 tool calls" in summary
    assert nothing == ""
    help_text = " ".join(_commands()["replay"].format_help().split())
    assert "stdout is the message as JSON either way" in help_text


# -- 8. the article before a word ----------------------------------------------------------------


def test_the_article_follows_the_word_printed() -> None:
    assert not hasattr(cli, "_a")  # one rule, in serve.py, not a copy
    assert _a("anthropic stream") == "an anthropic stream"
    assert _a("Anthropic capture") == "an Anthropic capture"
    assert _a("bedrock capture") == "a bedrock capture"
    assert _a("") == "a "


@pytest.mark.json_parser
def test_export_names_an_anthropic_capture_with_an(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.bedrock_helpers import BEDROCK, INVOKE

    path = str(BEDROCK / f"{INVOKE}.anthropic.jsonl")
    code, _, err = run(["export", path, "--to", "eventstream"], capsys)
    assert code == 2
    assert "an anthropic capture is framed as sse" in one_line(err)


def test_a_host_that_does_not_resolve_asks_about_the_name() -> None:
    error = RuntimeError("Connection error.")
    error.__context__ = socket.gaierror(-2, "Name or service not known")
    found = cli._unreachable(error, "http://nowhere.invalid/v1")
    assert found is not None
    assert found[1] == "can this machine resolve the host of http://nowhere.invalid/v1?"
    assert cli._unreachable(RuntimeError("other"), "http://x") is None


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["replay", PARALLEL, "--delay", "inf"], "argument --delay: must be a finite number"),
        (["replay", PARALLEL, "--delay", "nan"], "argument --delay: must be a finite number"),
        (["replay", PARALLEL, "--delay", "1e300"], "argument --delay: must be at most"),
        (["replay", PARALLEL, "--speed", "1e-300"], "so slow a chunk would never come"),
        (["serve", "--delay", "inf"], "argument --delay: must be a finite number"),
        (["serve", "--port", "99999"], "argument --port: must be at most 65535"),
        (["chat", "hi", "--model", "m", "--temperature", "inf"], "must be a finite number"),
    ],
)
def test_numbers_no_clock_can_wait_are_refused_in_one_line(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv, out=io.StringIO())
    assert exited.value.code == 2
    assert said in one_line(capsys.readouterr().err)


@pytest.mark.parametrize("url", ["http://[::1", "http://host:99999/v1", "http://host:port/v1"])
def test_a_base_url_that_does_not_parse_is_one_line(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["chat", "hi", "--model", "m", "--base-url", url], capsys)
    assert code == 2
    assert one_line(err).startswith(f"rxtoolcalls: --base-url {url}: ")


@pytest.mark.parametrize(
    "options",
    [
        {"delay": -1.0},
        {"delay": float("inf")},
        {"delays": {0: float("nan")}},
        {"delays": {0: "0.1"}},
        {"delays": {0: True}},
        {"cut": {0: -1}},
        {"cut": {0: 1.5}},
    ],
)
def test_replay_server_refuses_a_pause_or_cut_it_cannot_keep(options: dict[str, object]) -> None:
    recording = [{"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "stop"}]}]
    with pytest.raises(ValueError, match="must be"):
        ReplayServer([recording], **options)  # type: ignore[arg-type]
