"""The registry of wires: one descriptor per module, looked up by name.

- ``chat``: OpenAI Chat Completions chunks (and every "OpenAI-compatible" server).
- ``responses``: OpenAI Responses API events (``response.*``).
- ``anthropic``: Anthropic Messages events (``message_start`` … ``message_stop``).
- ``gemini``: Google Gemini ``streamGenerateContent`` responses (``candidates``).
- ``bedrock``: AWS Bedrock ``ConverseStream`` events (``messageStart`` … ``messageStop``).

Adding a wire is one module exporting its ``WIRE`` (a ``WireSpec``), one line here and its
name in the public ``Wire`` type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import get_args

from .._errors import MalformedChunkError
from .._types import Wire
from .._wire import WireSpec
from . import anthropic, bedrock, chat, gemini, responses

__all__ = ["WIRES", "detect", "lookup", "names"]

# Detection asks each in this order: the cheap, common tests first (Chat's ``choices``).
WIRES: tuple[WireSpec, ...] = (chat.WIRE, gemini.WIRE, responses.WIRE, anthropic.WIRE, bedrock.WIRE)

_BY_NAME: dict[str, WireSpec] = {spec.name: spec for spec in WIRES}
if set(_BY_NAME) != set(get_args(Wire)):  # pragma: no cover - caught by any import
    raise ImportError(f"the Wire type and the registry disagree: {sorted(_BY_NAME)}")


def names() -> tuple[str, ...]:
    """Every wire's name, in registry order."""
    return tuple(_BY_NAME)


def lookup(name: str) -> WireSpec:
    """The descriptor of the wire ``name``; ``LookupError`` for a name no wire has."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise LookupError(
            f"no wire is named {name!r}: the wires are {', '.join(_BY_NAME)}"
        ) from None


def detect(event: object) -> WireSpec | None:
    """The wire ``event`` belongs to alone, or ``None`` when it could belong to any."""
    if event is None or isinstance(event, str | bytes | int | float | list | tuple):
        return None
    try:
        for spec in WIRES:
            if spec.identifies(event):
                return spec
    except Exception as exc:  # a Mapping of the caller's whose lookup fails
        if not isinstance(event, Mapping):
            raise
        raise MalformedChunkError(
            f"reading a {type(event).__name__} event raised {type(exc).__name__}"
        ) from exc
    return None
