"""Keeping a transcript valid: every call answered, on every wire.

The shape is read from the messages themselves: each wire's descriptor says which messages
show it (``Transcript.shows``) and how its calls pair with their answers, for example:

- Chat Completions: an assistant message's ``tool_calls`` are answered by the ``role: "tool"``
  messages right after it (``tool_call_id``).
- OpenAI Responses: a ``function_call`` (or ``custom_tool_call``) item is answered by a
  ``function_call_output`` (``custom_tool_call_output``) item with its ``call_id`` anywhere
  after it. A turn is a run of the model's output items between inputs.
- Anthropic Messages and Bedrock Converse: an assistant message's tool blocks are answered by
  result blocks in the user message right after it.
- Gemini: a ``model`` content's ``functionCall`` parts are answered by the
  ``functionResponse`` parts of the content right after it: by ``id`` where the answer
  quotes one, else by ``name``, in order.

A transcript holding markers of two shapes is a ``ValueError``; one with none has no calls to
answer. An answer counts only where it stands: an answer to an earlier turn answers no later
call, whatever its id (TGI numbers calls ``"0"``, ``"1"``… in every turn).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._types import AssistantTurn, ToolCall
from ._wire import CANCELLED, Messages, WireSpec
from .wires import WIRES

__all__ = ["CANCELLED", "find_unanswered", "repair_transcript", "transcript_wire"]


def _shape(messages: Messages) -> WireSpec | None:
    """The wire whose shape ``messages`` show, or ``None`` when they show none."""
    found: dict[str, tuple[WireSpec, int]] = {}
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(
                f"message {position} is a {type(message).__name__}; messages are mappings"
            )
        spec = next((spec for spec in WIRES if spec.transcript.shows(message)), None)
        if spec is not None:
            found.setdefault(spec.name, (spec, position))
    if len(found) > 1:
        shown = ", ".join(f"{name} (message {at})" for name, (_, at) in found.items())
        raise ValueError(f"the messages mix the shapes of several wires: {shown}")
    return next((spec for spec, _ in found.values()), None)


def transcript_wire(messages: Messages) -> str | None:
    """The name of the wire whose shape ``messages`` show; ``None`` when they show none.

    ``TypeError`` for an entry that is not a mapping; ``ValueError`` when they show two.
    """
    spec = _shape(messages)
    return None if spec is None else spec.name


def find_unanswered(messages: Messages) -> list[tuple[int, list[str]]]:
    """Each turn (by position) whose calls lack answers, with the ids of those calls.

    Chat, Anthropic and Bedrock: the assistant message's position. Responses: the position
    of the first item of the turn's run of output items. Gemini: the model content's
    position, and each call's id, or its name where the model sent no id.
    """
    spec = _shape(messages)
    return [] if spec is None else spec.transcript.find(messages)


def repair_transcript(
    messages: Messages, mode: Literal["drop", "cancel"] = "drop"
) -> list[dict[str, Any]]:
    """A copy of ``messages`` that the API accepts again after an interrupted turn.

    A turn whose calls lack answers (someone appended it, then stopped) is dropped with its
    partial answers (``mode="drop"``), or its missing answers are filled with ``CANCELLED``
    (``mode="cancel"``; Anthropic and Bedrock mark them as errors, before the user's words in
    the message after the turn, a string content becoming a text block; Gemini answers
    ``{"error": CANCELLED}``, with all the turn's answers in call order in one content).
    Answers to no call are dropped in both modes. Valid transcripts come back unchanged.

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
    spec = _shape(messages)
    if spec is None:
        return [dict(message) for message in messages]
    return spec.transcript.repair(messages, mode)


@dataclass(frozen=True, slots=True)
class OpenTurn:
    """The last turn of a transcript, some of its calls unanswered, only answers after it.

    ``turn`` holds its calls (a Gemini call sent without an id gets one made up, as the
    reader does); ``answers`` the answers it has, as text, by call id.
    """

    turn: AssistantTurn
    answers: Mapping[str, str]


def open_turn(messages: Messages) -> OpenTurn | None:
    """The turn the messages stopped in: the last, if it lacks answers and only answers follow.

    ``None`` otherwise: a turn the conversation went on after (a user message, another turn)
    is ``repair_transcript``'s. ``ValueError`` when a call of the turn has arguments that are
    not a JSON object, or the messages show the shapes of two wires.
    """
    spec = _shape(messages)
    found = None if spec is None else spec.transcript.open(messages)
    if spec is None or found is None:
        return None
    asked, items, answers = found
    if all(call[2] in answers for call in asked):
        return None
    calls = tuple(_resumed_call(*call) for call in asked)
    turn = AssistantTurn(tool_calls=calls, wire=spec.name, items=items)
    return OpenTurn(turn, {c.id: answers[c.id] for c in calls if c.id in answers})


def with_answers(messages: Messages, answers: Messages) -> list[dict[str, Any]]:
    """``messages``, ending with an ``open_turn``, with ``answers`` to its other calls.

    ``answers`` are in the wire's shape (``tool_messages``). They go after the answers the
    turn has: into the same user message on Anthropic and Bedrock, into the same content on
    Gemini (all of the turn's answers in call order there).
    """
    out = [dict(message) for message in messages]
    added = [dict(answer) for answer in answers]
    spec = _shape(messages)
    if not added or len(out) < 2 or spec is None:
        return [*out, *added]
    return spec.transcript.add_answers(out, added)


def _resumed_call(
    at: int,
    index: int,
    call_id: str,
    name: object,
    arguments: object,
    kind: str,
    item_id: str | None,
) -> ToolCall:
    """Call ``index`` of the turn at position ``at``, as the loop runs it."""
    if not isinstance(name, str):
        raise ValueError(f"message {at}: call {call_id[:64]!r} has no name; it cannot be run")
    if kind == "custom":
        text = arguments if isinstance(arguments, str) else ""
        return ToolCall(index, call_id, name, text, {}, kind, item_id)
    parsed: object = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(
            f"message {at}: the arguments of call {call_id[:64]!r} ({name[:64]}) are not a "
            f"JSON object; it cannot be run"
        )
    text = arguments if isinstance(arguments, str) else json.dumps(parsed, default=str)
    return ToolCall(index, call_id, name, text, parsed, kind, item_id)
