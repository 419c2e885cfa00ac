"""Transcripts whose assistant message holds tool blocks answered by the next user message.

Anthropic Messages (``tool_use`` / ``tool_result``) and Bedrock Converse (``toolUse`` /
``toolResult``) pair calls with answers the same way; a ``BlockShape`` says how a wire spells
its blocks, and ``transcript(shape)`` gives the wire's ``Transcript``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._wire import Asked, Found, Messages, Transcript, answer_text

__all__ = ["BlockShape", "transcript"]


@dataclass(frozen=True, slots=True)
class BlockShape:
    """How a wire spells its tool blocks."""

    call: Callable[[Mapping[str, Any]], tuple[str, object, object] | None]
    """A tool call block's id, name and input; ``None`` for any other block."""
    result: Callable[[Mapping[str, Any]], tuple[str | None, object] | None]
    """A result block's call id (``None``: not a string) and content; ``None`` for any other
    block."""
    cancelled: Callable[[str], dict[str, Any]]
    """The error result that answers a call that never ran."""
    text: Callable[[str], dict[str, Any]]
    """A text block."""
    alternate: bool
    """Whether the API refuses two messages of one role in a row (Bedrock's Converse does;
    Anthropic's joins them): a repair then joins them itself."""


def blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The message's content blocks (none for a string content)."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, Mapping)]


def transcript(shape: BlockShape) -> Transcript:
    """The pairing rules of a wire whose tool blocks are spelled as ``shape`` says."""

    def call_ids(message: Mapping[str, Any]) -> list[str]:
        if message.get("role") != "assistant":
            return []
        return [found[0] for b in blocks(message) if (found := shape.call(b)) is not None]

    def result_ids(message: Mapping[str, Any] | None) -> set[str]:
        if message is None or message.get("role") != "user":
            return set()
        return {
            found[0]
            for b in blocks(message)
            if (found := shape.result(b)) is not None and found[0] is not None
        }

    def shows(message: Mapping[str, Any]) -> bool:
        return any(
            shape.call(b) is not None or shape.result(b) is not None for b in blocks(message)
        )

    def turns(messages: Messages) -> list[tuple[int, list[str], set[str]]]:
        """Each assistant message with calls: position, ids, ids answered right after."""
        found = []
        for position, message in enumerate(messages):
            ids = call_ids(message)
            if ids:
                following = messages[position + 1] if position + 1 < len(messages) else None
                found.append((position, ids, result_ids(following)))
        return found

    def find(messages: Messages) -> list[tuple[int, list[str]]]:
        return [
            (position, missing)
            for position, ids, answered in turns(messages)
            if (missing := [i for i in ids if i not in answered])
        ]

    def answers_only(
        message: Mapping[str, Any], wanted: Sequence[str], missing: Sequence[str]
    ) -> dict[str, Any] | None:
        """A user message with its results to ``wanted`` kept once, ``missing`` filled after.

        String content becomes a text block after the results. ``None`` when nothing is left.
        """
        content = message.get("content")
        if isinstance(content, str) and missing:
            # The results must open the message after the turn; the API refuses an empty text.
            content = [shape.text(content)] if content else []
        if not isinstance(content, list):
            return dict(message)
        kept: list[Any] = []
        seen: set[str] = set()
        results = 0
        for block in content:
            found = shape.result(block) if isinstance(block, Mapping) else None
            if found is not None:
                call_id = found[0]
                if call_id is None or call_id not in wanted or call_id in seen:
                    continue  # answers no call of the turn before: the API refuses it
                seen.add(call_id)
                kept.insert(results, dict(block))
                results += 1
            else:
                kept.append(block)
        kept[results:results] = [shape.cancelled(call_id) for call_id in missing]
        if content and not kept:
            return None
        return {**message, "content": kept}

    def repair(messages: Messages, mode: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        wanted: list[str] = []
        missing: list[str] = []
        for position, message in enumerate(messages):
            if message.get("role") == "user":
                answered = answers_only(message, wanted, missing)
                wanted, missing = [], []
                if answered is not None:
                    out.append(answered)
                continue
            ids = call_ids(message)
            following = messages[position + 1] if position + 1 < len(messages) else None
            wanted, missing = [], []
            if ids:
                answered_ids = result_ids(following)
                lacking = [call_id for call_id in ids if call_id not in answered_ids]
                if lacking and mode == "drop":
                    continue  # with no ids wanted, the next message's results to it go too
                wanted, missing = ids, lacking
            out.append(dict(message))
            if missing and (
                following is None
                or following.get("role") != "user"
                or not isinstance(following.get("content"), list | str)
            ):
                out.append({"role": "user", "content": [shape.cancelled(c) for c in missing]})
                wanted, missing = [], []
        return joined(out) if shape.alternate else out

    def joined(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages with each run of one role joined into one message.

        A dropped turn leaves the user's words before and after it side by side.
        """
        out: list[dict[str, Any]] = []
        for message in messages:
            last = out[-1] if out else None
            if last is not None and last.get("role") == message.get("role"):
                out[-1] = {**last, "content": [*content_of(last), *content_of(message)]}
            else:
                out.append(message)
        return out

    def content_of(message: Mapping[str, Any]) -> list[Any]:
        content = message.get("content")
        if isinstance(content, str):
            return [shape.text(content)] if content else []
        return list(content) if isinstance(content, list) else []

    def open_turn(messages: Messages) -> Found | None:
        at = len(messages) - 1
        results: list[Mapping[str, Any]] = []
        if at >= 0 and messages[at].get("role") == "user":
            content = messages[at].get("content")
            if not isinstance(content, list) or not all(
                isinstance(b, Mapping) and shape.result(b) is not None for b in content
            ):
                return None
            results, at = content, at - 1
        if at < 0 or not call_ids(messages[at]):
            return None
        answers: dict[str, str] = {}
        for block in results:
            found = shape.result(block)
            if found is not None and found[0] is not None:
                answers.setdefault(found[0], answer_text(found[1]))
        held = blocks(messages[at])
        calls: list[Asked] = []
        for index, block in enumerate(held):
            call = shape.call(block)
            if call is not None:
                calls.append((at, index, call[0], call[1], call[2], "function", None))
        return calls, tuple(dict(block) for block in held), answers

    def add_answers(out: list[dict[str, Any]], added: list[dict[str, Any]]) -> list[dict[str, Any]]:
        last = out[-1]
        if last.get("role") == "user":
            last["content"] = [*last["content"], *added[0]["content"]]
            return out
        return [*out, *added]

    return Transcript(
        shows=shows, find=find, repair=repair, open=open_turn, add_answers=add_answers
    )
