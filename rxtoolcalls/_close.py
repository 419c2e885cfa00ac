"""Closing a turn, for every wire: classify the finish, parse each buffer once, build atomically.

``check_finish`` (per choice, in index order):

1. No finish: ``StreamInterruptedError``, unless ``require_finish_reason=False`` (Chat only:
   the other wires always end with a terminal event).
2. ``length`` (the wire's token ceiling) with a tool call: ``TruncatedToolCallError`` (never
   repaired); with prose only the turn is emitted. ``content_filter``:
   ``ContentFilteredError``. ``invalid_call`` (the provider refused the model's call, Gemini
   ``MALFORMED_FUNCTION_CALL``): ``InvalidArgumentsError`` with the provider's message.
   ``error``: ``ProviderError``. ``stop`` and ``tool_calls`` emit
   (``stop`` keeps the calls: OpenAI sends it when ``tool_choice`` forces a function).
   Wires name their finishes their own way; each reader states its finish in these terms
   (``ChoiceEnd.outcome``) and the turn keeps the wire's own ``finish_reason``.
3. A call whose wire closes calls but never closed it, or closed it with a value still open:
   ``TruncatedToolCallError``.

``build_turns``:

4. Every call needs a name and an id; its arguments are parsed once and must be exactly one
   JSON object (no ``NaN``/``Infinity``, no number that overflows to infinity): text ending
   inside a value is a ``TruncatedToolCallError`` whatever the finish says, anything else an
   ``InvalidArgumentsError``. Free-form calls (``json=False``) are kept as text.
5. No two calls of a choice share an id (each answer pairs with one call): a repeat is a
   ``MalformedChunkError``; under ``synthesize_missing_ids`` it gets the call's index as a
   suffix instead, and a count after it if a call of the choice (server-run and made-up ids
   included) has that id (``renamed_duplicate_ids``), in the calls and in the turn's items.
6. Everything is computed before anything is returned: all calls of all choices, or one error.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ._errors import (
    RETRY_HINT,
    ContentFilteredError,
    InvalidArgumentsError,
    LimitExceededError,
    MalformedChunkError,
    MultipleChoicesError,
    ProviderError,
    StreamInterruptedError,
    ToolCallStreamError,
    TruncatedToolCallError,
    UnknownToolError,
    clip,
    excerpt,
)
from ._policy import DEFAULT, Policy, PolicyName, named_policy
from ._types import (
    AssistantTurn,
    CallItem,
    StreamEnd,
    ToolCall,
    ToolCallBuffer,
    new_tool_call,
    new_turn,
)

if TYPE_CHECKING:
    from ._wire import WireSpec

__all__ = [
    "build_turns",
    "built_alone",
    "check_finish",
    "every_turn",
    "resolve_policy",
    "single_turn",
]


def _where(choice_index: int, index: int | None, name: str | None) -> str:
    where = f"tool call {excerpt(index)}" if index is not None else "a tool call"
    if name:
        where += f" ({name if len(name) <= 64 else excerpt(name, 64)})"
    if choice_index:
        where += f" of choice {excerpt(choice_index)}"
    return where


def _where_buffer(buffer: ToolCallBuffer) -> str:
    return _where(buffer.choice_index, buffer.index, buffer.name)


def _at_buffer(buffer: ToolCallBuffer, finish_reason: str | None) -> dict[str, Any]:
    """Where an error about a closed buffer happened, for its diagnostics."""
    return {
        "choice_index": buffer.choice_index,
        "index": buffer.index,
        "name": buffer.name,
        "received": len(buffer.arguments),
        "finish_reason": finish_reason,
    }


# Sort keys read in C: a lambda per call costs more than the comparison.
_ORDER = attrgetter("choice_index", "index", "order")
_LAST = attrgetter("index", "order")


def _wire_spec(name: str) -> WireSpec:
    from .wires import lookup  # the wires import this module

    return lookup(name)


def check_finish(
    end: StreamEnd, calls: Sequence[ToolCallBuffer], policy: Policy = DEFAULT
) -> StreamEnd:
    """Apply the finish policy (rules 1-3) to every choice; raise the first violation.

    Returns ``end``, with the recoveries the policy applied added to its normalizations.
    """
    normalizations = dict(end.normalizations)
    terminal = _wire_spec(end.wire).terminal
    for choice in end.choices:
        said = choice.finish_reason
        # A wire with a terminal event states its finish once it came; None means it never
        # did. Without one, the finish the wire said is the outcome.
        reason = choice.outcome if terminal else said
        where = f"choice {choice.index}: " if choice.index else ""
        mine = [c for c in calls if c.choice_index == choice.index and not c.server]
        if choice.function_call is not None:
            mine.append(choice.function_call)
        last = max(mine, key=_LAST) if mine else None
        about: dict[str, Any] = {
            "choice_index": choice.index,
            "finish_reason": said,
            "index": None if last is None else last.index,
            "name": None if last is None else last.name,
            "received": None if last is None else len(last.arguments),
        }
        if reason is None:
            # The switches are for servers that never send a finish; a wire with a terminal
            # event always sends it, so its absence is a cut connection.
            if not policy.require_finish_reason and not terminal:
                continue
            if policy.accept_clean_end and not terminal:
                # Complete arguments are still required: build_turns parses every buffer.
                normalizations["accepted_missing_finish"] = (
                    normalizations.get("accepted_missing_finish", 0) + 1
                )
                continue
            raise StreamInterruptedError(
                f"{where}the stream ended without a finish_reason, so the turn may be cut off"
                if not terminal
                else f"the {_wire_spec(end.wire).title} stream ended before its terminal event, so "
                f"the turn may be cut off",
                # The switch is for a wire without a terminal event: on another, only a
                # retry can help.
                hint=f"{RETRY_HINT}; a provider that never sends one needs "
                f"require_finish_reason=False"
                if not terminal
                else RETRY_HINT,
                **about,
            )
        if reason == "length":
            if last is not None:
                raise TruncatedToolCallError(
                    f"{_where(choice.index, last.index, last.name)}: finish_reason {said!r} "
                    f"while a tool call was open, after {len(last.arguments):,} argument "
                    f"characters: the token limit cut it off (never repaired)",
                    hint="raise max_tokens and retry the request",
                    **about,
                )
        elif reason == "content_filter":
            filtered = ContentFilteredError(
                f"{where}the provider's content filter stopped the turn "
                f"(finish_reason {said!r}); nothing was emitted",
                **about,
            )
            filtered.content = choice.content
            raise filtered
        elif reason == "invalid_call":
            # The provider's message quotes the call, arguments and all: it stays out of the
            # text a log prints, in ``provider_message`` for whoever asks.
            said_more = (
                f"; its message ({len(choice.message):,} characters) is in provider_message"
                if choice.message
                else ""
            )
            refused = InvalidArgumentsError(
                f"{where}the provider refused the model's tool call (finish_reason "
                f"{said!r}){said_more}; nothing was emitted",
                hint="retry the request: the model may well get it right the next time",
                **about,
            )
            refused.provider_message = choice.message
            raise refused
        elif reason == "error":
            raise ProviderError(
                f"{where}the provider ended the choice with finish_reason {said!r}; "
                f"nothing was emitted",
                choice_index=choice.index,
                finish_reason=said,
            )
        elif reason == "tool_calls" and last is None:
            if not policy.accept_tool_calls_finish_without_calls:
                raise MalformedChunkError(
                    f"{where}finish_reason {said!r} but no tool call was streamed: calls "
                    f"may have been lost",
                    hint=(
                        "retry the request; the lenient policy "
                        "(accept_tool_calls_finish_without_calls) accepts it"
                    ),
                    **about,
                )
            normalizations["tool_calls_finish_without_calls"] = (
                normalizations.get("tool_calls_finish_without_calls", 0) + 1
            )
        for buffer in calls:
            if buffer.closed is False and buffer.choice_index == choice.index:
                raise TruncatedToolCallError(
                    f"{_where_buffer(buffer)}: the stream never completed the call (it, or a "
                    f"value in it, was still open; finish_reason {said!r}), after "
                    f"{len(buffer.arguments):,} argument characters: it was cut off (never "
                    f"repaired)",
                    hint="retry the request, with a higher token limit if the output was long",
                    **_at_buffer(buffer, said),
                )
    if normalizations == end.normalizations:
        return end
    return replace(end, normalizations=normalizations)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_INFINITY = float("inf")


def _finite_float(text: str) -> float:
    # 1e999 (or 400 digits) is valid JSON text but parses to infinity, which no tool can use
    # and json.dumps would write back as the non-JSON token Infinity.
    value = float(text)
    if value == _INFINITY or value == -_INFINITY:
        raise ValueError("a number is too large for a double (it would parse to infinity)")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        repeated = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {excerpt(repeated)} appears twice in one object")
    return value


# A text that more characters could still turn into a JSON number: JSON's own grammar, ASCII
# digits only. Possessive quantifiers never backtrack, so a failed match is linear in its length
# (the old greedy pattern retried every split of a digit run: quadratic).
_OPEN_NUMBER = re.compile(r"-?(?:(?:0|[1-9][0-9]*+)(?:\.[0-9]*+|(?:\.[0-9]++)?[eE][-+]?[0-9]*+)?)?")
# The characters of a number token, read backwards from where the scanner stopped.
_NUMBER_RUN = re.compile(r"[-+.eE0-9]*+")
_LITERALS = ("true", "false", "null")


# One decoder each, made once: json.loads with hooks builds a new decoder on every call.
# Decoders keep no state between calls, so sharing them is safe.
_STRICT = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_UNIQUE_KEYS = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
)


def _ends_inside_value(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether the parser stopped because the text ran out, not because it was wrong.

    True when ``text`` (trailing whitespace aside) is the start of some valid JSON text.
    Linear in the length of the text (it runs only after a failed parse).
    """
    msg, pos = exc.msg, exc.pos
    if msg.startswith("Unterminated string"):
        return True
    if msg.startswith("Invalid \\uXXXX escape"):
        # A cut escape: at most four characters after its "\u" (the scanner wants one more
        # after a complete escape at the end), every one a hex digit.
        # (pos is at the backslash or at the "u", depending on the scanner.)
        start = text.rfind("\\u", max(0, pos - 1), pos + 2)
        digits = text[start + 2 :]
        return start >= 0 and len(digits) <= 4 and all(c in _HEX for c in digits)
    if msg == "Extra data" or msg.startswith("Invalid"):
        # A control character or an unknown escape inside a string: no text can mend it
        # (a control character may be whitespace, which the next step would strip).
        return False
    tail = text[pos:].rstrip()
    if not tail:
        return True
    if msg == "Expecting value" and len(tail) < 5 and any(t.startswith(tail) for t in _LITERALS):
        return True
    if msg == "Expecting value":
        # The scanner stops at the start of a number it cannot read yet ("-").
        token = tail
    else:
        # Or right after the part it accepted ("1" of "1.", "1.5" of "1.5e+"): the token
        # runs from the number's start to the end.
        run = _NUMBER_RUN.match(text[pos - 1 :: -1]).end() if pos else 0  # type: ignore[union-attr]
        if not run:
            return False
        token = text[pos - run :].rstrip()
    return token[:1] in _NUMBER_START and _OPEN_NUMBER.fullmatch(token) is not None


_HEX = frozenset("0123456789abcdefABCDEF")
_NUMBER_START = frozenset("-0123456789")


def _json_failure(exc: json.JSONDecodeError) -> str:
    # Some of the parser's messages end in "at" ("Invalid control character at").
    return f"{exc.msg.removesuffix(' at')} at character {exc.pos}"


def _depth(value: object, limit: int) -> bool:
    """Whether ``value`` nests containers deeper than ``limit`` (iterative, linear)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if type(item) is dict:
            stack.extend((v, depth + 1) for v in item.values() if type(v) in (dict, list))
        elif type(item) is list:
            stack.extend((v, depth + 1) for v in item if type(v) in (dict, list))
    return False


def _parse(buffer: ToolCallBuffer, policy: Policy, finish_reason: str | None) -> dict[str, Any]:
    text = buffer.arguments
    # The messages are built only on failure: on success this is one decode per call.
    if not text or text.isspace():
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: no arguments were sent "
            f"(a call without parameters must send '{{}}')",
            **_at_buffer(buffer, finish_reason),
        )
    if text[0] == "\ufeff":
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments start "
            f"with a byte order mark, which JSON text must not have",
            **_at_buffer(buffer, finish_reason),
        )
    failure: ToolCallStreamError | None = None
    try:
        value = (_UNIQUE_KEYS if policy.reject_duplicate_keys else _STRICT).decode(text)
    except json.JSONDecodeError as exc:
        where = _where_buffer(buffer)
        if _ends_inside_value(text, exc):
            failure = TruncatedToolCallError(
                f"{where}: the arguments end inside a JSON value ({_json_failure(exc)} of "
                f"{len(text)}): the call was cut off (never repaired)",
                hint=RETRY_HINT,
                **_at_buffer(buffer, finish_reason),
            )
        else:
            failure = InvalidArgumentsError(
                f"{where}: the arguments are not valid JSON ({_json_failure(exc)}): the model "
                f"produced a malformed call",
                hint="retry the request: the model may well get it right the next time",
                **_at_buffer(buffer, finish_reason),
            )
    except RecursionError:
        failure = LimitExceededError(
            f"{_where_buffer(buffer)}: the arguments nest deeper than the JSON parser allows",
            limit="max_depth",
            value=policy.limits.max_depth,
            **_at_buffer(buffer, finish_reason),
        )
    except ValueError as exc:
        reason = str(exc)
        if "integer string conversion" in reason:
            # Python's own text names sys.set_int_max_str_digits: advice for the caller.
            reason = f"an integer has more than {sys.get_int_max_str_digits()} digits"
        failure = InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments are not strict JSON ({reason})",
            **_at_buffer(buffer, finish_reason),
        )
    if failure is not None:
        # Raised outside the handler, with nothing chained: the parser's error holds the
        # whole text (its doc, its frames' locals), secrets and all, for as long as ours is.
        raise failure
    if type(value) is not dict:
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments must be "
            f"a JSON object, got {type(value).__name__}",
            **_at_buffer(buffer, finish_reason),
        )
    # Nesting can't exceed the number of opening brackets: counting them (in C) spares the
    # walk over the value for nearly every call.
    limit = policy.limits.max_depth
    if text.count("{") + text.count("[") > limit and _depth(value, limit):
        raise LimitExceededError(
            f"{_where_buffer(buffer)}: the arguments nest deeper than Limits.max_depth ({limit})",
            limit="max_depth",
            value=policy.limits.max_depth,
            **_at_buffer(buffer, finish_reason),
        )
    return value


def _complete(
    buffer: ToolCallBuffer,
    policy: Policy,
    finish_reason: str | None,
    count: Callable[[str], None],
    parsed: dict[str, Any] | None = None,
) -> ToolCall:
    if buffer.name is None:
        raise MalformedChunkError(
            f"{_where_buffer(buffer)}: no function name was ever sent",
            choice_index=buffer.choice_index,
            index=buffer.index,
            received=len(buffer.arguments),
            finish_reason=finish_reason,
        )
    if policy.tools is not None and buffer.name not in policy.tools and not buffer.server:
        raise UnknownToolError(
            f"{_where_buffer(buffer)}: the model called a tool the request did not declare; "
            f"declared: {', '.join(sorted(policy.tools)) or 'none'}",
            **_at_buffer(buffer, finish_reason),
        )
    call_id = buffer.id
    if call_id is None:
        if not policy.synthesize_missing_ids:
            raise MalformedChunkError(
                f"{_where_buffer(buffer)}: no id was ever sent, so no tool message could answer it",
                hint="the lenient policy (synthesize_missing_ids) makes one up",
                **_at_buffer(buffer, finish_reason),
            )
        count("synthesized_id")
        call_id = f"call_rx_{buffer.choice_index}_{buffer.index}_{buffer.order}"
    if not buffer.json:
        # Free-form input (Responses custom tools): the text is the payload, never parsed.
        return new_tool_call(
            buffer.index, call_id, buffer.name, buffer.arguments, {}, "custom", buffer.item_id
        )
    if parsed is None:
        parsed = _parse(buffer, policy, finish_reason)
    schema = policy.tools.get(buffer.name) if policy.tools is not None else None
    if schema is not None and policy.validate_arguments:
        _validate(buffer, parsed, schema, finish_reason)
    return new_tool_call(
        buffer.index,
        call_id,
        buffer.name,
        buffer.arguments,
        parsed,
        buffer.type or "function",
        buffer.item_id,
    )


def built_alone(buffer: ToolCallBuffer, policy: Policy) -> ToolCall | None:
    """The call rule 4 builds from ``buffer`` alone, or ``None`` where it would refuse it.

    For a call complete before its turn (``agent_loop(early=...)``): the close still decides
    the turn, and gives its typed error.
    """
    try:
        return _complete(buffer, policy, None, _uncounted)
    except ToolCallStreamError:
        return None


def _uncounted(name: str) -> None:
    """Counts nothing: a call built alone adds no normalization to any turn."""


def _validate(
    buffer: ToolCallBuffer, value: dict[str, Any], schema: Any, finish_reason: str | None
) -> None:
    import jsonschema  # the "schema" extra; Policy checks it is installed

    try:
        error = jsonschema.exceptions.best_match(
            jsonschema.validators.validator_for(schema)(schema).iter_errors(value)
        )
    except RecursionError as exc:
        # Policy refuses a schema that recurses on any value; this one recursed on this value.
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments nest too deep to check against the "
            f"tool's JSON schema",
            **_at_buffer(buffer, finish_reason),
        ) from exc
    if error is not None:
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments do not match the tool's JSON schema "
            f"at {error.json_path[:64]}{'…' if len(error.json_path) > 64 else ''}: "
            f"{_schema_failure(error)}",
            **_at_buffer(buffer, finish_reason),
        )


def _schema_failure(error: Any) -> str:
    """What a schema error says, without the value itself (it may hold a secret)."""
    kind = type(error.instance).__name__
    keyword = error.validator
    if keyword == "type":
        return f"a value of type {kind} is not of type {excerpt(error.validator_value, 40)}"
    if keyword == "required":
        missing = [p for p in error.validator_value if p not in error.instance]
        return f"{excerpt(missing[0] if missing else '?', 40)} is a required property"
    return f"a value of type {kind} fails {excerpt(keyword)} ({excerpt(error.validator_value, 40)})"


def build_turns(
    buffers: Sequence[ToolCallBuffer],
    end: StreamEnd,
    policy: Policy = DEFAULT,
    known: Mapping[tuple[int, int, int], dict[str, Any]] | None = None,
) -> tuple[AssistantTurn, ...]:
    """Parse every buffer once and build one turn per choice (rules 4-6), or raise.

    ``known``: values that parsing some buffers' arguments gives, by (choice index, index,
    order), from the reader that wrote those arguments; they are taken instead.
    """
    normalizations = dict(end.normalizations)

    def count(name: str) -> None:
        normalizations[name] = normalizations.get(name, 0) + 1

    finish = {choice.index: choice.finish_reason for choice in end.choices}
    by_choice: dict[int, list[ToolCall]] = {}
    built: dict[tuple[int, int], ToolCall] = {}
    for buffer in sorted(buffers, key=_ORDER):
        parsed = known.get((buffer.choice_index, buffer.index, buffer.order)) if known else None
        call = _complete(buffer, policy, finish.get(buffer.choice_index), count, parsed)
        built[buffer.choice_index, buffer.index] = call
        if not buffer.server:
            by_choice.setdefault(buffer.choice_index, []).append(call)
    for index, calls in by_choice.items():
        if len({call.id for call in calls}) != len(calls):
            by_choice[index] = _unique_ids(index, built, buffers, policy, finish.get(index), count)
    legacy: dict[int, ToolCall] = {}
    for choice in end.choices:
        if choice.function_call is not None:
            buffer = choice.function_call
            if buffer.name is None:
                raise MalformedChunkError(
                    f"choice {choice.index}: the legacy function_call never got a name",
                    choice_index=choice.index,
                    finish_reason=choice.finish_reason,
                )
            legacy[choice.index] = ToolCall(
                0, "", buffer.name, buffer.arguments, _parse(buffer, policy, choice.finish_reason)
            )
    return tuple(
        new_turn(
            content=choice.content,
            tool_calls=tuple(by_choice.get(choice.index, ())),
            finish_reason=choice.finish_reason,
            refusal=choice.refusal,
            reasoning=choice.reasoning,
            usage=end.usage,
            choice_index=choice.index,
            function_call=legacy.get(choice.index),
            normalizations=normalizations,
            wire=end.wire,
            items=tuple(
                item.render(built[choice.index, item.index]) if isinstance(item, CallItem) else item
                for item in choice.items
            ),
        )
        for choice in end.choices
    )


def _unique_ids(
    choice_index: int,
    built: dict[tuple[int, int], ToolCall],
    buffers: Sequence[ToolCallBuffer],
    policy: Policy,
    finish_reason: str | None,
    count: Callable[[str], None],
) -> list[ToolCall]:
    """The choice's client calls, a repeated id renamed (rule 5), or raise.

    ``built`` gets the renamed calls too (the turn's items render them). A new name takes no
    id of any call of the choice, server-run and made up ones included.
    """
    ordered = sorted((b for b in buffers if b.choice_index == choice_index), key=_ORDER)
    used = {built[choice_index, buffer.index].id for buffer in ordered}
    taken: set[str] = set()
    calls: list[ToolCall] = []
    for buffer in ordered:
        call = built[choice_index, buffer.index]
        if buffer.server:
            continue
        if call.id in taken:
            if not policy.synthesize_missing_ids:
                raise MalformedChunkError(
                    f"{_where_buffer(buffer)}: its id {clip(call.id, 64)!r} is an earlier "
                    f"call's too; each call needs its own (an answer pairs with one call)",
                    hint="retry the request; the lenient policy (synthesize_missing_ids) "
                    "renames it",
                    **_at_buffer(buffer, finish_reason),
                )
            new_id = f"{call.id}_{call.index}"
            again = 1
            while new_id in used:
                again += 1
                new_id = f"{call.id}_{call.index}_{again}"
            used.add(new_id)
            call = built[choice_index, buffer.index] = replace(call, id=new_id)
            count("renamed_duplicate_ids")
        taken.add(call.id)
        calls.append(call)
    return calls


def every_turn(turns: tuple[AssistantTurn, ...]) -> tuple[AssistantTurn, ...]:
    """All turns, one per choice; a stream without any choice is an interruption."""
    if not turns:
        raise StreamInterruptedError(
            "the stream completed without any choice: no turn to assemble",
            hint=(
                "retry the request; if the chunks were read by another subscriber first "
                "(share() over a synchronous source), use assemble_with_progress()"
            ),
        )
    return turns


def single_turn(turns: tuple[AssistantTurn, ...]) -> AssistantTurn:
    """The only turn of a single-choice stream (an empty stream is an interruption)."""
    if len(every_turn(turns)) == 1:
        return turns[0]
    raise MultipleChoicesError(
        f"the stream carries {len(turns)} choices (n>1) and this operator returns one",
        hint="assemble_choices() returns every choice atomically",
    )


def resolve_policy(
    policy: Policy | PolicyName | None, require_finish_reason: bool | None
) -> Policy:
    """``policy`` (``DEFAULT`` when None, or a name) with the ``require_finish_reason`` shortcut.

    Raises ``TypeError`` (``ValueError`` for an unknown name) at once for anything else.
    """
    chosen = named_policy(policy)
    if require_finish_reason is not None and type(require_finish_reason) is not bool:
        raise TypeError(
            f"require_finish_reason must be a bool or None, got "
            f"{type(require_finish_reason).__name__}"
        )
    if require_finish_reason is None or require_finish_reason == chosen.require_finish_reason:
        return chosen
    return replace(chosen, require_finish_reason=require_finish_reason)
