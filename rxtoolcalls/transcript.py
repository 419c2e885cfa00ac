"""Keeping a transcript valid: every call answered, on every wire.

The shape is read from the messages themselves:

- Chat Completions: an assistant message's ``tool_calls`` are answered by the ``role: "tool"``
  messages right after it (``tool_call_id``).
- OpenAI Responses: the input is a list of items; a ``function_call`` (or
  ``custom_tool_call``) item is answered by a ``function_call_output``
  (``custom_tool_call_output``) item with its ``call_id`` anywhere after it. A turn is a run
  of the model's output items (reasoning, messages, calls, server items) between inputs.
- Anthropic Messages: an assistant message's ``tool_use`` blocks are answered by
  ``tool_result`` blocks (``tool_use_id``) in the user message right after it.
- Gemini: a ``model`` content's ``functionCall`` parts are answered by the
  ``functionResponse`` parts of the content right after it: by ``id`` where the answer
  quotes one, else by ``name``, in order.

A transcript holding markers of two shapes is a ``ValueError``; one with none is read as Chat.
An answer counts only where it stands: an answer to an earlier turn answers no later call,
whatever its id (TGI numbers calls ``"0"``, ``"1"``… in every turn).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._types import AssistantTurn, ToolCall, Wire

__all__ = ["CANCELLED", "find_unanswered", "repair_transcript", "transcript_wire"]

CANCELLED = "Cancelled: the turn was interrupted before this tool ran."
"""The answer ``repair_transcript(mode="cancel")`` gives each dangling call."""

Messages = Sequence[Mapping[str, Any]]

# Responses items that answer a call, by the call item type they answer.
_OUTPUTS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
_ANSWERS = frozenset(_OUTPUTS.values())
_INPUT_ROLES = frozenset({"user", "system", "developer"})


def transcript_wire(messages: Messages) -> Wire:
    """The wire whose shape ``messages`` have: ``"chat"`` unless they show another.

    ``TypeError`` for an entry that is not a mapping; ``ValueError`` when they show two.
    """
    found: dict[Wire, int] = {}
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(
                f"message {position} is a {type(message).__name__}; messages are mappings"
            )
        kind = message.get("type")
        if isinstance(kind, str) and kind != "message":
            found.setdefault("responses", position)
        elif message.get("role") == "tool" or message.get("tool_calls"):
            found.setdefault("chat", position)
        elif any(b.get("type") in ("tool_use", "tool_result") for b in _blocks(message)):
            found.setdefault("anthropic", position)
        elif message.get("role") == "model" or any(
            "functionCall" in p or "functionResponse" in p for p in _parts(message)
        ):
            found.setdefault("gemini", position)
    if len(found) > 1:
        shown = ", ".join(f"{wire} (message {position})" for wire, position in found.items())
        raise ValueError(f"the messages mix the shapes of several wires: {shown}")
    return next(iter(found), "chat")


def find_unanswered(messages: Messages) -> list[tuple[int, list[str]]]:
    """Each turn (by position) whose calls lack answers, with the ids of those calls.

    Chat and Anthropic: the assistant message's position. Responses: the position of the
    first item of the turn's run of output items. Gemini: the model content's position, and
    each call's id, or its name where the model sent no id.
    """
    wire = transcript_wire(messages)
    if wire == "responses":
        return [(start, missing) for start, _, _, missing in _responses_turns(messages) if missing]
    if wire == "gemini":
        return [
            (position, [call_id or name for name, call_id, _ in missing])
            for position, _, missing in _gemini_turns(messages)
            if missing
        ]
    if wire == "anthropic":
        return [
            (position, missing)
            for position, ids, answered in _anthropic_turns(messages)
            if (missing := [i for i in ids if i not in answered])
        ]
    return _chat_find(messages)


def repair_transcript(
    messages: Messages, mode: Literal["drop", "cancel"] = "drop"
) -> list[dict[str, Any]]:
    """A copy of ``messages`` that the API accepts again after an interrupted turn.

    A turn whose calls lack answers (someone appended it, then stopped) is dropped with its
    partial answers (``mode="drop"``), or its missing answers are filled with ``CANCELLED``
    (``mode="cancel"``; Anthropic marks them ``is_error``, before the user's words in the
    message after the turn, a string content becoming a text block; Gemini answers
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
    wire = transcript_wire(messages)
    if wire == "responses":
        return _responses_repair(messages, mode)
    if wire == "anthropic":
        return _anthropic_repair(messages, mode)
    if wire == "gemini":
        return _gemini_repair(messages, mode)
    return _chat_repair(messages, mode)


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
    wire = transcript_wire(messages)
    if wire == "responses":
        found = _responses_open(messages)
    elif wire == "anthropic":
        found = _anthropic_open(messages)
    elif wire == "gemini":
        found = _gemini_open(messages)
    else:
        found = _chat_open(messages)
    if found is None:
        return None
    asked, items, answers = found
    if all(call[2] in answers for call in asked):
        return None
    calls = tuple(_resumed_call(*call) for call in asked)
    turn = AssistantTurn(tool_calls=calls, wire=wire, items=items)
    return OpenTurn(turn, {c.id: answers[c.id] for c in calls if c.id in answers})


def with_answers(messages: Messages, answers: Messages) -> list[dict[str, Any]]:
    """``messages``, ending with an ``open_turn``, with ``answers`` to its other calls.

    ``answers`` are in the wire's shape (``tool_messages``). They go after the answers the
    turn has: into the same user message on Anthropic, into the same content on Gemini (all
    of the turn's answers in call order there).
    """
    out = [dict(message) for message in messages]
    added = [dict(answer) for answer in answers]
    wire = transcript_wire(messages)
    if not added or len(out) < 2:
        return [*out, *added]
    last = out[-1]
    if wire == "anthropic" and last.get("role") == "user":
        last["content"] = [*last["content"], *added[0]["content"]]
        return out
    if wire == "gemini" and not _is_model(last):
        parts = [*last["parts"], *added[0]["parts"]]
        taken = _match(_function_calls(out[-2]), parts)
        answering = [taken[at] for at in sorted(taken)]
        others = set(range(len(parts))) - set(answering)
        last["parts"] = [parts[at] for at in [*answering, *sorted(others)]]
        return out
    return [*out, *added]


# A call as a transcript holds it: its message's position, index, id, name, arguments,
# type and item id (``_resumed_call``'s arguments).
_Asked = tuple[int, int, str, object, object, str, str | None]
# What each wire's reading of an open turn gives: its calls, its items, its answers by id.
_Found = tuple[list[_Asked], tuple[dict[str, Any], ...], dict[str, str]]


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


def answer_text(value: object) -> str:
    """An answer's content as text: a string as is, text blocks joined, anything else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(b, Mapping) and isinstance(b.get("text"), str) for b in value
    ):
        return "".join(b["text"] for b in value)
    return json.dumps(value, default=str)


# -- Chat Completions -----------------------------------------------------------------------


def _tool_calls(message: Mapping[str, Any]) -> Sequence[Any]:
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list | tuple) else []


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    calls = _tool_calls(message)
    return [c["id"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str)]


def _chat_find(messages: Messages) -> list[tuple[int, list[str]]]:
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


def _chat_repair(messages: Messages, mode: str) -> list[dict[str, Any]]:
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


def _chat_open(messages: Messages) -> _Found | None:
    at = len(messages)
    while at and messages[at - 1].get("role") == "tool":
        at -= 1
    if not at or messages[at - 1].get("role") != "assistant":
        return None
    at -= 1
    answers: dict[str, str] = {}
    for answer in messages[at + 1 :]:
        call_id = answer.get("tool_call_id")
        if isinstance(call_id, str):
            answers.setdefault(call_id, answer_text(answer.get("content")))
    calls: list[_Asked] = []
    for index, entry in enumerate(_tool_calls(messages[at])):
        if isinstance(entry, Mapping) and isinstance(entry.get("id"), str):
            function = entry.get("function")
            function = function if isinstance(function, Mapping) else {}
            name, arguments = function.get("name"), function.get("arguments")
            calls.append((at, index, entry["id"], name, arguments, "function", None))
    return calls, (), answers


# -- OpenAI Responses -----------------------------------------------------------------------


def _text(value: object) -> str | None:
    """``value`` when it is a string: a field to look up (a list is no key)."""
    return value if isinstance(value, str) else None


def _is_answer(item: Mapping[str, Any]) -> bool:
    return _text(item.get("type")) in _ANSWERS


def _is_output(item: Mapping[str, Any]) -> bool:
    """Whether an item is the model's (a turn's), not an input or an answer."""
    return not _is_answer(item) and _text(item.get("role")) not in _INPUT_ROLES


def _call_of(item: Mapping[str, Any]) -> str | None:
    call_id = _text(item.get("call_id"))
    return call_id if _text(item.get("type")) in _OUTPUTS else None


def _responses_turns(
    items: Messages,
) -> list[tuple[int, int, list[Mapping[str, Any]], list[str]]]:
    """Each turn: start, end (exclusive), its call items, and the ids no later item answers."""
    answered_after: list[set[str]] = [set() for _ in range(len(items) + 1)]
    for position in range(len(items) - 1, -1, -1):
        answered_after[position] = answered_after[position + 1]
        item = items[position]
        if _is_answer(item) and isinstance(item.get("call_id"), str):
            answered_after[position] = {*answered_after[position], item["call_id"]}
    turns: list[tuple[int, int, list[Mapping[str, Any]], list[str]]] = []
    position = 0
    while position < len(items):
        if not _is_output(items[position]):
            position += 1
            continue
        end = position
        while end < len(items) and _is_output(items[end]):
            end += 1
        calls = [item for item in items[position:end] if _call_of(item) is not None]
        later = answered_after[end]
        missing = [item["call_id"] for item in calls if item["call_id"] not in later]
        turns.append((position, end, calls, missing))
        position = end
    return turns


def _responses_repair(items: Messages, mode: str) -> list[dict[str, Any]]:
    turns = {start: (end, calls, missing) for start, end, calls, missing in _responses_turns(items)}
    out: list[dict[str, Any]] = []
    waiting: set[str] = set()
    position = 0
    while position < len(items):
        item = items[position]
        if position in turns:
            end, calls, missing = turns[position]
            if missing and mode == "drop":
                position = end  # with its calls unopened, their partial answers go too
                continue
            out.extend(dict(entry) for entry in items[position:end])
            waiting.update(c["call_id"] for c in calls if c["call_id"] not in missing)
            out.extend(
                {"type": _OUTPUTS[c["type"]], "call_id": c["call_id"], "output": CANCELLED}
                for c in calls
                if c["call_id"] in missing
            )
            position = end
            continue
        position += 1
        if _is_answer(item):
            if _text(item.get("call_id")) in waiting:
                waiting.discard(item["call_id"])
                out.append(dict(item))
            continue  # an answer to no open call (or a second one): the API refuses it
        out.append(dict(item))
    return out


def _responses_open(items: Messages) -> _Found | None:
    turns = _responses_turns(items)
    if not turns:
        return None
    start, end, _, _ = turns[-1]
    if not all(_is_answer(item) for item in items[end:]):
        return None
    answers: dict[str, str] = {}
    for item in items[end:]:
        call_id = _text(item.get("call_id"))
        if call_id is not None:
            answers.setdefault(call_id, answer_text(item.get("output")))
    calls: list[_Asked] = []
    for at in range(start, end):
        item = items[at]
        call_id = _call_of(item)
        if call_id is not None:
            custom = item.get("type") == "custom_tool_call"
            arguments = item.get("input" if custom else "arguments")
            kind = "custom" if custom else "function"
            item_id = _text(item.get("id"))
            calls.append((at, len(calls), call_id, item.get("name"), arguments, kind, item_id))
    return calls, tuple(dict(item) for item in items[start:end]), answers


# -- Anthropic Messages ---------------------------------------------------------------------


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, Mapping)]


def _tool_use_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") != "assistant":
        return []
    return [
        b["id"]
        for b in _blocks(message)
        if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
    ]


def _result_ids(message: Mapping[str, Any] | None) -> set[str]:
    if message is None or message.get("role") != "user":
        return set()
    return {
        b["tool_use_id"]
        for b in _blocks(message)
        if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)
    }


def _anthropic_turns(messages: Messages) -> list[tuple[int, list[str], set[str]]]:
    """Each assistant message with tool_use blocks: position, ids, ids answered right after."""
    turns = []
    for position, message in enumerate(messages):
        ids = _tool_use_ids(message)
        if ids:
            following = messages[position + 1] if position + 1 < len(messages) else None
            turns.append((position, ids, _result_ids(following)))
    return turns


def _cancelled(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": CANCELLED, "is_error": True}


def _answers_only(
    message: Mapping[str, Any], wanted: Sequence[str], missing: Sequence[str]
) -> dict[str, Any] | None:
    """A user message with its results to ``wanted`` kept once, ``missing`` filled after them.

    String content becomes a text block after the results. ``None`` when nothing is left.
    """
    content = message.get("content")
    if isinstance(content, str) and missing:
        # The results must open the message after the turn; the API refuses an empty text.
        content = [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return dict(message)
    kept: list[Any] = []
    seen: set[str] = set()
    results = 0
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or call_id not in wanted or call_id in seen:
                continue  # answers no call of the turn before: the API refuses it
            seen.add(call_id)
            kept.insert(results, dict(block))
            results += 1
        else:
            kept.append(block)
    kept[results:results] = [_cancelled(call_id) for call_id in missing]
    if content and not kept:
        return None
    return {**message, "content": kept}


def _anthropic_repair(messages: Messages, mode: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    wanted: list[str] = []
    missing: list[str] = []
    for position, message in enumerate(messages):
        if message.get("role") == "user":
            answered = _answers_only(message, wanted, missing)
            wanted, missing = [], []
            if answered is not None:
                out.append(answered)
            continue
        ids = _tool_use_ids(message)
        following = messages[position + 1] if position + 1 < len(messages) else None
        wanted, missing = [], []
        if ids:
            answered_ids = _result_ids(following)
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
            out.append({"role": "user", "content": [_cancelled(c) for c in missing]})
            wanted, missing = [], []
    return out


def _anthropic_open(messages: Messages) -> _Found | None:
    at = len(messages) - 1
    results: list[Mapping[str, Any]] = []
    if at >= 0 and messages[at].get("role") == "user":
        content = messages[at].get("content")
        if not isinstance(content, list) or not all(
            isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
        ):
            return None
        results, at = content, at - 1
    if at < 0 or not _tool_use_ids(messages[at]):
        return None
    answers: dict[str, str] = {}
    for block in results:
        call_id = _text(block.get("tool_use_id"))
        if call_id is not None:
            answers.setdefault(call_id, answer_text(block.get("content")))
    blocks = _blocks(messages[at])
    calls: list[_Asked] = [
        (at, index, b["id"], b.get("name"), b.get("input"), "function", None)
        for index, b in enumerate(blocks)
        if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
    ]
    return calls, tuple(dict(block) for block in blocks), answers


# -- Gemini ---------------------------------------------------------------------------------

# A call of a model content: its name, its id (None: the model sent none), its part.
_GeminiCall = tuple[str, str | None, Mapping[str, Any]]


def _parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    parts = message.get("parts")
    if not isinstance(parts, list):
        return []
    return [part for part in parts if isinstance(part, Mapping)]


def _is_model(message: Mapping[str, Any] | None) -> bool:
    return message is not None and message.get("role") == "model"


def _function_calls(message: Mapping[str, Any]) -> list[_GeminiCall]:
    """The calls of a model content, in order."""
    if not _is_model(message):
        return []
    calls: list[_GeminiCall] = []
    for part in _parts(message):
        call = part.get("functionCall")
        if isinstance(call, Mapping) and isinstance(call.get("name"), str):
            calls.append((call["name"], _text(call.get("id")) or None, call))
    return calls


def _response_of(part: object) -> Mapping[str, Any] | None:
    """The ``functionResponse`` a part holds, if it is one."""
    if not isinstance(part, Mapping):
        return None
    response = part.get("functionResponse")
    return response if isinstance(response, Mapping) else None


def _match(calls: Sequence[_GeminiCall], parts: Sequence[object]) -> dict[int, int]:
    """Which part answers which call: {call position: part position}.

    An answer quoting an id takes the call with that id; one without takes the first call
    of its name not yet answered. A second answer to a call, or one to no call, takes none.
    """
    by_id: dict[str, int] = {}
    for at, (_, call_id, _) in enumerate(calls):
        if call_id is not None:
            by_id.setdefault(call_id, at)
    taken: dict[int, int] = {}
    for at, part in enumerate(parts):
        response = _response_of(part)
        call_id = None if response is None else _text(response.get("id")) or None
        if call_id is not None:
            found = by_id.get(call_id)
            if found is not None and found not in taken:
                taken[found] = at
    for at, part in enumerate(parts):
        response = _response_of(part)
        if response is None or _text(response.get("id")):
            continue
        name = _text(response.get("name"))
        for found, (call_name, _, _) in enumerate(calls):
            if call_name == name and found not in taken:
                taken[found] = at
                break
    return taken


def _answering(messages: Messages, position: int) -> Mapping[str, Any] | None:
    """The content after the model content at ``position``, if it can answer it."""
    following = messages[position + 1] if position + 1 < len(messages) else None
    if following is None or _is_model(following) or not isinstance(following.get("parts"), list):
        return None
    return following


def _answer_parts(message: Mapping[str, Any] | None) -> list[object]:
    parts = None if message is None else message.get("parts")
    return parts if isinstance(parts, list) else []


def _gemini_turns(messages: Messages) -> list[tuple[int, dict[int, int], list[_GeminiCall]]]:
    """Each model content with calls: position, which parts answer them, the calls unanswered."""
    turns = []
    for position, message in enumerate(messages):
        calls = _function_calls(message)
        if calls:
            taken = _match(calls, _answer_parts(_answering(messages, position)))
            missing = [call for at, call in enumerate(calls) if at not in taken]
            turns.append((position, taken, missing))
    return turns


def _cancelled_response(call: _GeminiCall) -> dict[str, Any]:
    name, call_id, _ = call
    answer: dict[str, Any] = {"name": name}
    if call_id is not None:
        answer["id"] = call_id
    answer["response"] = {"error": CANCELLED}
    return {"functionResponse": answer}


def _gemini_answers_only(
    message: Mapping[str, Any], calls: Sequence[_GeminiCall], fill: bool
) -> dict[str, Any] | None:
    """A content with its answers to ``calls`` kept once; with ``fill``, every call answered.

    Filled answers are all the calls', in call order, where the first answer was (Gemini
    wants a turn's answers together). ``None`` when nothing is left of it.
    """
    parts = message.get("parts")
    if not isinstance(parts, list):
        return dict(message)
    taken = _match(calls, parts)
    answers = set(taken.values())
    kept: list[Any] = []
    block: int | None = None
    for at, part in enumerate(parts):
        if _response_of(part) is None:
            kept.append(part)
            continue
        if block is None:
            block = len(kept)
        if at in answers and not fill:
            kept.append(dict(part))
        # else: an answer to no call of the turn before (the API refuses it), or one
        # that the filled block below puts in its call's place
    if fill:
        ordered = [
            dict(parts[taken[at]]) if at in taken else _cancelled_response(call)
            for at, call in enumerate(calls)
        ]
        at = 0 if block is None else block
        kept[at:at] = ordered
    if parts and not kept:
        return None
    return {**message, "parts": kept}


def _gemini_repair(messages: Messages, mode: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    calls: list[_GeminiCall] = []
    fill = False
    for position, message in enumerate(messages):
        if not _is_model(message):
            answered = _gemini_answers_only(message, calls, fill)
            calls, fill = [], False
            if answered is not None:
                out.append(answered)
            continue
        found = _function_calls(message)
        following = _answering(messages, position)
        calls, fill = [], False
        if found:
            taken = _match(found, _answer_parts(following))
            if len(taken) < len(found) and mode == "drop":
                continue  # with no calls wanted, the next content's answers to it go too
            calls, fill = found, len(taken) < len(found)
        out.append(dict(message))
        if fill and following is None:
            out.append({"role": "user", "parts": [_cancelled_response(c) for c in calls]})
            calls, fill = [], False
    return out


def _gemini_open(messages: Messages) -> _Found | None:
    at = len(messages) - 1
    parts: list[object] = []
    if at >= 0 and not _is_model(messages[at]):
        parts = _answer_parts(messages[at])
        if not isinstance(messages[at].get("parts"), list) or any(
            _response_of(part) is None for part in parts
        ):
            return None
        at -= 1
    found = _function_calls(messages[at]) if at >= 0 else []
    if not found:
        return None
    sent = {call_id for _, call_id, _ in found}
    calls: list[_Asked] = []
    for index, (name, call_id, call) in enumerate(found):
        given = call_id
        if given is None:
            # Its place in the turn, not its id, is what the loop's ledger keys on.
            given = f"call_{index}"
            while given in sent:
                given += "_"
        calls.append((at, index, given, name, call.get("args", {}), "function", None))
    answers: dict[str, str] = {}
    for index, part_at in _match(found, parts).items():
        response = _response_of(parts[part_at])
        value = None if response is None else response.get("response")
        if isinstance(value, Mapping) and set(value) == {"output"}:
            value = value["output"]
        answers[calls[index][2]] = answer_text(value)
    return calls, tuple(dict(part) for part in _parts(messages[at])), answers
