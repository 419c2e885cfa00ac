"""What the library needs to know about a wire, as one typed descriptor per wire.

Each ``wires/<name>.py`` builds one ``WireSpec``; ``wires.WIRES`` lists them and ``lookup``
finds one by name. Nothing outside ``wires/`` branches on a wire's name: it looks the wire up
and calls what the descriptor holds. Every field is required, so a wire that lacks one is a
type error, not a silent default.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from reactivex import Observable

    from ._core import Core
    from ._errors import ProviderError
    from ._types import AssistantTurn, Wire

__all__ = [
    "CANCELLED",
    "MODES",
    "Asked",
    "Client",
    "ClientSetupError",
    "Found",
    "Framing",
    "Messages",
    "Request",
    "Route",
    "Transcript",
    "WireSpec",
    "answer_text",
    "appended",
    "functions",
    "given",
    "no_sdk_stream",
    "prompt_as_text",
    "text_of",
]

CANCELLED = "Cancelled: the turn was interrupted before this tool ran."
"""The answer ``repair_transcript(mode="cancel")`` gives each dangling call."""

Messages = Sequence[Mapping[str, Any]]

# A call as a transcript holds it: its message's position, index, id, name, arguments, type
# and item id.
Asked = tuple[int, int, str, object, object, str, "str | None"]
# An open turn as a wire reads it: its calls, its items, its answers (as text) by call id.
Found = tuple[list[Asked], tuple[dict[str, Any], ...], dict[str, str]]


def text_of(value: object) -> str | None:
    """``value`` when it is a string: a field to look up (a list is no key)."""
    return value if isinstance(value, str) else None


def appended(out: list[dict[str, Any]], added: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``Transcript.add_answers`` for a wire whose answers are messages of their own."""
    return [*out, *added]


def no_sdk_stream(value: object, loop: asyncio.AbstractEventLoop | None) -> Observable[Any] | None:
    """``WireSpec.sdk_stream`` for a wire whose SDK streams the agent reads as any iterable."""
    return None


def answer_text(value: object) -> str:
    """An answer's content as text: a string as is, text blocks joined, anything else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(b, Mapping) and isinstance(b.get("text"), str) for b in value
    ):
        return "".join(b["text"] for b in value)
    return json.dumps(value, default=str)


@dataclass(frozen=True, slots=True)
class Transcript:
    """How a transcript of the wire pairs calls with answers (see ``transcript.py``)."""

    shows: Callable[[Mapping[str, Any]], bool]
    """Whether a message has this wire's shape (a marker no other wire's messages have)."""
    find: Callable[[Messages], list[tuple[int, list[str]]]]
    """Each turn (by position) whose calls lack answers, with the ids of those calls."""
    repair: Callable[[Messages, str], list[dict[str, Any]]]
    """The messages with each such turn dropped (``"drop"``) or answered (``"cancel"``)."""
    open: Callable[[Messages], Found | None]
    """The last turn, when only answers follow it: its calls, items and answers."""
    add_answers: Callable[[list[dict[str, Any]], list[dict[str, Any]]], list[dict[str, Any]]]
    """Messages ending in an open turn (copies), with more answers in the wire's place."""


@dataclass(frozen=True, slots=True)
class Framing:
    """How the wire's events travel over HTTP: one event as bytes, and what ends a stream."""

    name: str
    """``"sse"`` or ``"eventstream"`` (``export --to``)."""
    media_type: str
    """The ``Content-Type`` of a stream in this framing."""
    frame: Callable[[Mapping[str, Any]], bytes]
    """One event as the bytes that carry it."""
    end: bytes
    """What ends a stream (``data: [DONE]`` on Chat), or ``b""``."""
    read: Callable[[bytes], list[dict[str, Any]] | None] | None
    """The events of a whole raw body in a binary framing (the CLI reads such a file as a
    capture), ``None`` for a body that is not in it; ``None`` for a text framing (read as
    Server-Sent Events)."""


@dataclass(frozen=True, slots=True)
class Route:
    """A path the replay server answers for the wire, and how."""

    tail: str
    """The end of the path (a client may put any base URL before it)."""
    streams: bool | None
    """Whether the path streams; ``None``: the request's ``"stream": true`` decides."""
    framing: Framing
    """How the path frames its events."""
    serves: str | None = None
    """The wire of the recordings it serves, when another one (Bedrock's InvokeModel carries
    Anthropic events)."""


MODES = ("auto", "none", "required")
"""The ``tool_choice`` modes, as Chat Completions names them; each client maps them."""


@dataclass(frozen=True, slots=True)
class Request:
    """What a client asks each turn, in no wire's shape: each wire's client writes it in its own."""

    model: str
    tools: list[dict[str, Any]]
    """Declarations in the Chat Completions shape: ``{"type": "function", "function": …}``."""
    choice: str | None
    """``None`` (the server's), a mode of ``MODES`` or a declared tool's name."""
    temperature: float | None
    max_tokens: int | None
    system: str | None


class ClientSetupError(Exception):
    """A wire's SDK client cannot be made as asked; the message says what to set."""


def given(**values: Any) -> dict[str, Any]:
    """The keyword arguments that were given: ``None`` leaves the SDK's default."""
    return {key: value for key, value in values.items() if value is not None}


def functions(request: Request) -> list[tuple[str, str, object]]:
    """Each declared tool's name, description (its name if none) and parameters schema."""
    found = []
    for tool in request.tools:
        function = tool["function"]
        name = function["name"]
        schema = function.get("parameters") or {"type": "object"}
        found.append((name, function.get("description") or name, schema))
    return found


def prompt_as_text(prompt: str, system: str | None) -> list[dict[str, Any]]:
    """``Client.messages`` for a wire whose system prompt is a field of the request."""
    return [{"role": "user", "content": prompt}]


@dataclass(frozen=True, slots=True)
class Client:
    """How to reach the wire through its SDK (the ``chat`` command's requests)."""

    sdk: str
    """The module to import."""
    package: str
    """Its name on PyPI, as a message names it."""
    extra: str
    """The extra of rxtoolcalls that installs it."""
    credentials: str
    """Where the SDK's key comes from, as the help says it."""
    address: str
    """The form of a base URL the SDK takes, as the help says it."""
    modes: tuple[str, ...]
    """The ``tool_choice`` modes of ``MODES`` the wire's API has."""
    max_tokens: int | None
    """``max_tokens`` sent when none is asked, where the API requires one; else ``None``."""
    connect: Callable[[Any, str | None], tuple[Any, str]]
    """A client of the SDK module for a base URL (``None``: the SDK's own), and its URL;
    ``ClientSetupError`` when the settings it needs are missing."""
    messages: Callable[[str, str | None], list[dict[str, Any]]]
    """The first messages, from the prompt and the system message (where it is a message)."""
    open: Callable[[Any, Request, list[dict[str, Any]]], Any]
    """The SDK's stream of one turn."""


@dataclass(frozen=True, slots=True)
class WireSpec:
    """One wire: how to recognise it, read it, answer in it, serve it and pair its transcript."""

    name: Wire
    """The name ``wire=`` takes and ``turn.wire`` shows."""
    title: str
    """The wire as people name it ("OpenAI Chat Completions")."""
    identifies: Callable[[object], bool]
    """Whether an event (a Mapping or an SDK object) belongs to this wire alone."""
    unwrap: Callable[[object], object | None] | None
    """The event of another wire that an envelope of this one wraps (Bedrock's InvokeModel
    ``chunk``), or ``None``; this wire's own error event among the envelopes raises its
    ``ProviderError``."""
    reader: type[Core]
    """The reader class: the wire's rules, fed one event at a time."""
    terminal: bool
    """Whether the wire always ends with a terminal event (Chat's finish may never come)."""
    pause_reasons: frozenset[str]
    """Finish reasons that ask for the turn to be sent back as is (``needs_continuation``)."""
    to_message: Callable[[AssistantTurn, str | None], Any]
    """``turn.to_message()``: the turn as the wire's API takes it back."""
    tool_messages: Callable[[AssistantTurn, list[object], list[str]], list[dict[str, Any]]]
    """The answers, from each call's result and its text (an exception: its message)."""
    made_up_ids: Callable[[AssistantTurn], frozenset[str]]
    """The ids of the turn's calls that the model never sent (the reader made them up)."""
    transcript: Transcript
    """How the wire's transcript pairs calls with answers."""
    retryable: frozenset[str]
    """Error types or codes of the wire's provider that a retry can help."""
    final: frozenset[str]
    """Error types or codes that a retry cannot help."""
    sdk_error: Callable[[Exception], ProviderError | None]
    """The wire's SDK error as a ``ProviderError``; ``None`` for an error of another SDK."""
    sdk_packages: frozenset[str]
    """The top-level packages of the wire's SDK: their errors (a lost connection) may pass on
    a second try."""
    sdk_stream: Callable[[object, asyncio.AbstractEventLoop | None], Observable[Any] | None]
    """What an agent's ``open_stream`` returned, as an Observable of events, when it is the
    wire's own SDK stream that needs its own source; ``None`` otherwise."""
    path: str
    """The server's main path, as logs and messages show it."""
    routes: tuple[Route, ...]
    """The paths the replay server answers for the wire; the first is the main one."""
    reply: Callable[[tuple[AssistantTurn, ...], Sequence[Mapping[str, Any]]], dict[str, Any]]
    """The non-streaming answer a recording (and its turns) stands for."""
    error_body: Callable[[int, str, str, object], Any]
    """An error reply's body in the wire's shape, from status, message, kind and code."""
    tool_schemas: Callable[[Mapping[str, Any]], list[tuple[str, object]] | None]
    """The names and JSON schemas (or ``None``) a tool declaration of this wire's request
    declares; ``None`` when the declaration is not in this wire's shape."""
    client: Client
    """How the ``chat`` command reaches the wire through its SDK."""
