"""Exit statuses and the one-line explanation of a typed error: table, hints, in-band errors."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

import rxtoolcalls
import rxtoolcalls.agent
from rxtoolcalls.__main__ import EXIT_CODES, _explain, main
from tests.helpers import FIXTURES

COMMAND_LINE = (Path(__file__).parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")


def _subclasses(kind: type[Exception]) -> set[type[Exception]]:
    found = set()
    for sub in kind.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def test_every_typed_error_has_its_own_status() -> None:
    assert rxtoolcalls.agent.TurnLimitError is not None  # the agent's errors are loaded
    root = rxtoolcalls.ToolCallStreamError
    ours = {k for k in _subclasses(root) if k.__module__.startswith("rxtoolcalls")}
    listed = {kind for kind, _ in EXIT_CODES}
    assert ours <= listed
    codes = [code for _, code in EXIT_CODES]
    assert len(set(codes)) == len(codes)
    assert dict(EXIT_CODES)[root] == 1
    assert 2 not in codes


def test_the_readme_table_lists_every_status() -> None:
    for kind, code in EXIT_CODES:
        assert re.search(rf"^\| {code} \| `{kind.__name__}`", COMMAND_LINE, re.M), kind
    assert re.search(r"^\| 2 \| usage or I/O", COMMAND_LINE, re.M)


def test_the_error_s_own_hint_is_shown_once() -> None:
    error = rxtoolcalls.ProviderError("the provider reported an error inside the stream: 'busy'")
    setattr(error, "hint", "retry the request")  # noqa: B010 - before and after hint= exists
    err = io.StringIO()
    assert _explain(error, err, "chat") == 9
    assert err.getvalue() == (
        "rxtoolcalls: ProviderError: the provider reported an error inside the stream: 'busy' "
        "— retry the request\n"
    )


def test_a_capture_is_not_told_to_retry() -> None:
    error = rxtoolcalls.ProviderError("busy", hint="retry the request: nothing was emitted")
    err = io.StringIO()
    assert _explain(error, err, "replay") == 9
    assert err.getvalue() == "rxtoolcalls: ProviderError: busy\n"


def test_no_hint_no_dash() -> None:
    err = io.StringIO()
    assert _explain(rxtoolcalls.ContentFilteredError("filtered"), err, "replay") == 6
    assert err.getvalue() == "rxtoolcalls: ContentFilteredError: filtered\n"


def _hinted(error: rxtoolcalls.ToolCallStreamError, hint: str, command: str) -> str:
    setattr(error, "hint", hint)  # noqa: B010 - before and after hint= exists
    err = io.StringIO()
    _explain(error, err, command)
    return err.getvalue().rstrip("\n").split(" — ", 1)[1]


def test_python_advice_becomes_the_command_s_own_or_goes() -> None:
    several = rxtoolcalls.MultipleChoicesError("3 choices")
    assert _hinted(several, "assemble_choices() returns every choice", "replay") == (
        "request one choice (n=1)"
    )
    lost = rxtoolcalls.MalformedChunkError("no calls")
    lenient = "retry the request; the lenient policy (accept_tool_calls_finish_without_calls) "
    assert _hinted(lost, lenient + "accepts it", "chat") == (
        "retry the request; --policy lenient accepts it"
    )
    # A capture read again fails again: no retry advice for the commands that read one.
    assert _hinted(lost, lenient + "accepts it", "replay") == "--policy lenient accepts it"
    cut = rxtoolcalls.TruncatedToolCallError("cut")
    assert _hinted(cut, "raise max_tokens and retry the request", "chat") == "raise --max-tokens"
    assert _hinted(cut, "raise max_tokens and retry the request", "replay") == (
        "raise max_tokens and retry the request"
    )
    empty = rxtoolcalls.StreamInterruptedError("no choice")
    empty.__cause__ = ValueError("source")
    advice = "retry the request; if read by another subscriber first (share()), use x()"
    assert _hinted(empty, advice, "chat") == "retry the request"


@pytest.mark.json_parser
def test_a_missing_finish_reason_points_at_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "snowflake__cortex_no_finish_reason.jsonl"
    assert main(["replay", str(path)], out=io.StringIO()) == 4
    line = capsys.readouterr().err
    assert line.count("\n") == 1
    assert line.count(" — ") == 1
    assert line.endswith(
        "--no-require-finish-reason or --policy lenient accept a stream without one\n"
    )
    assert "retry — retry" not in line


def test_a_multi_line_message_stays_one_line() -> None:
    err = io.StringIO()
    _explain(rxtoolcalls.InvalidArgumentsError("first\nsecond"), err, "replay")
    assert err.getvalue() == "rxtoolcalls: InvalidArgumentsError: first second\n"


@pytest.mark.json_parser
@pytest.mark.parametrize(
    "tail",
    [
        'error: {"message": "model overloaded", "code": 503}\n\n',
        "error: model overloaded\n\n",
        'event: error\ndata: {"message": "model overloaded"}\n\n',
        'data: {"error": {"message": "model overloaded", "code": 503}}\n\n',
    ],
)
def test_replay_honours_in_band_errors_of_raw_sse(
    tmp_path: Path, tail: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = tmp_path / "x.sse"
    first = '{"choices": [{"index": 0, "delta": {"content": "Hel"}}]}'
    capture.write_text(f"data: {first}\n\n{tail}")
    out = io.StringIO()
    assert main(["replay", str(capture)], out=out) == 9
    assert out.getvalue() == ""
    line = capsys.readouterr().err
    assert line.startswith("rxtoolcalls: ProviderError: ")
    assert "model overloaded" in line
