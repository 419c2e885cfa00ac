"""Chunk sources: the only modules that do I/O."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import reactivex
from reactivex import Observable

from ._errors import MalformedChunkError

__all__ = ["from_jsonl", "read_jsonl"]


def read_jsonl(source: str | os.PathLike[str] | Iterable[str]) -> Iterator[dict[str, Any]]:
    """Yield the chunks of a capture: a path to a ``.jsonl`` file, or its lines.

    Blank lines are skipped; a line that is not a JSON object raises ``MalformedChunkError``.
    """
    if isinstance(source, str | os.PathLike):
        with Path(source).open(encoding="utf-8") as lines:
            yield from _parse_lines(lines)
    else:
        yield from _parse_lines(source)


def _parse_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            chunk = json.loads(line)
        except ValueError as exc:
            raise MalformedChunkError(f"line {number} is not JSON: {exc}") from exc
        if type(chunk) is not dict:
            raise MalformedChunkError(f"line {number} is not a JSON object: {type(chunk).__name__}")
        yield chunk


def from_jsonl(source: str | os.PathLike[str] | Iterable[str]) -> Observable[dict[str, Any]]:
    """An Observable of the chunks of a ``.jsonl`` capture; each subscription reads it anew.

    >>> from reactivex import operators as ops
    >>> from_jsonl(['{"choices": []}', '', '{"choices": []}']).pipe(ops.count()).run()
    2
    """
    return reactivex.defer(lambda _: reactivex.from_iterable(read_jsonl(source)))
