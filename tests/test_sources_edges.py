"""Sources at the edges: the legacy error field before [DONE], SSE limits, deep JSON lines."""

from __future__ import annotations

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls._sse import error_field_error
from rxtoolcalls.sources import read_jsonl

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser


def test_a_legacy_error_field_before_done_is_a_provider_error() -> None:
    lines = [
        b'data: {"choices": []}\n\n',
        b'error: {"message": "model crashed"}\n\n',
        b"data: [DONE]\n\n",
    ]
    with pytest.raises(rt.ProviderError, match="model crashed"):
        rt.from_sse(lines).pipe(ops.to_list()).run()


def test_from_sse_takes_limits_for_its_lines() -> None:
    long_line = [b"data: " + b"x" * 5000]  # no newline: it would be buffered whole
    with pytest.raises(rt.LimitExceededError):
        rt.from_sse(long_line, limits=rt.Limits(max_event=1024)).pipe(ops.to_list()).run()


def test_a_deeply_nested_capture_line_is_a_malformed_chunk() -> None:
    with pytest.raises(rt.MalformedChunkError):
        list(read_jsonl(["[" * 100_000 + "]" * 100_000]))


def test_a_legacy_error_field_message_is_bounded() -> None:
    error = error_field_error("not json " + "s" * 100_000)
    assert isinstance(error, rt.ProviderError)
    assert len(str(error)) < 400
