"""Keeping a chat transcript valid: every assistant ``tool_calls`` answered, in order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["CANCELLED", "find_unanswered", "repair_transcript"]

CANCELLED = "Cancelled: the turn was interrupted before this tool ran."
"""The tool message content ``repair_transcript(mode="cancel")`` answers dangling calls with."""


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    calls = message.get("tool_calls") or []
    return [c["id"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str)]


def find_unanswered(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, list[str]]]:
    """Each assistant message (by position) whose calls lack a tool message right after it."""
    broken: list[tuple[int, list[str]]] = []
    for position, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        wanted = _call_ids(message)
        if not wanted:
            continue
        answered = set()
        for follower in messages[position + 1 :]:
            if follower.get("role") != "tool":
                break
            answered.add(follower.get("tool_call_id"))
        missing = [call_id for call_id in wanted if call_id not in answered]
        if missing:
            broken.append((position, missing))
    return broken


def repair_transcript(
    messages: Sequence[Mapping[str, Any]], mode: Literal["drop", "cancel"] = "drop"
) -> list[dict[str, Any]]:
    """A copy of ``messages`` that the API accepts again after an interrupted turn.

    An assistant message whose tool calls lack answers (someone appended it, then stopped) is
    dropped with its partial answers (``mode="drop"``), or its missing answers are filled with a
    ``CANCELLED`` tool message the model can read (``mode="cancel"``). Tool messages answering
    no call are dropped in both modes. Valid transcripts come back unchanged.

    >>> broken = [{"role": "user", "content": "hi"},
    ...           {"role": "assistant", "content": None,
    ...            "tool_calls": [{"id": "a", "type": "function",
    ...                            "function": {"name": "f", "arguments": "{}"}}]}]
    >>> [m["role"] for m in repair_transcript(broken)]
    ['user']
    >>> [m.get("content") for m in repair_transcript(broken, "cancel")][-1] == CANCELLED
    True
    """
    if mode not in ("drop", "cancel"):
        raise ValueError(f"mode must be 'drop' or 'cancel', got {mode!r}")
    out: list[dict[str, Any]] = []
    position = 0
    while position < len(messages):
        message = dict(messages[position])
        position += 1
        role = message.get("role")
        if role == "tool":
            continue  # an answer to no open call: the API refuses it
        wanted = _call_ids(message) if role == "assistant" else []
        if not wanted:
            out.append(message)
            continue
        answers: dict[str, dict[str, Any]] = {}
        while position < len(messages) and messages[position].get("role") == "tool":
            answer = dict(messages[position])
            position += 1
            if answer.get("tool_call_id") in wanted and answer["tool_call_id"] not in answers:
                answers[answer["tool_call_id"]] = answer
        if len(answers) == len(wanted):
            out.append(message)
            out.extend(answers[call_id] for call_id in wanted)
        elif mode == "cancel":
            out.append(message)
            out.extend(
                answers.get(call_id)
                or {"role": "tool", "tool_call_id": call_id, "content": CANCELLED}
                for call_id in wanted
            )
    return out
