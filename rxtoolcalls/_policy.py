"""Policies and limits: plain frozen values passed to ``assemble(...)``, never global state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from ._types import documented_state

__all__ = ["DEFAULT", "LENIENT", "Limits", "Policy", "PolicyName", "named_policy"]


def check_schema(name: str, schema: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` unless ``schema`` is a JSON schema that can check arguments.

    A schema that breaks its metaschema (``{"type": 5}``, a bad ``pattern``), refers to
    nothing, or refers to itself without end (``{"$ref": "#"}``) is the caller's bug, told
    when the policy is built rather than in the middle of a stream.
    """
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(dict(schema))
        # A trial run finds references to nowhere and self-references without end.
        for probe in ({}, {"": None}):
            jsonschema.exceptions.best_match(cls(schema).iter_errors(probe))
    except jsonschema.exceptions.SchemaError as exc:
        raise ValueError(
            f"the JSON schema of tool {name!r} is invalid at {exc.json_path}: {exc.message:.120}"
        ) from exc
    except RecursionError as exc:
        raise ValueError(f"the JSON schema of tool {name!r} refers to itself without end") from exc
    except Exception as exc:
        raise ValueError(
            f"the JSON schema of tool {name!r} cannot be applied ({type(exc).__name__})"
        ) from exc


@documented_state
@dataclass(frozen=True, slots=True)
class Limits:
    """Ceilings against hostile or runaway output; exceeding one is a ``LimitExceededError``.

    Every field the assembler accumulates has one. Sizes count characters as received (before
    any parsing), checked before a fragment is stored, so nothing is kept past a limit:

    - ``max_call_arguments``, ``max_turn_arguments``: argument text of one call, of the turn
      (every call of every choice, legacy ``function_call`` included);
    - ``max_calls``: tool calls opened in the turn; ``max_choices``: choices in the stream;
    - ``max_depth``: nesting of parsed arguments;
    - ``max_text``: content, refusal and reasoning of the turn together (every choice), and
      the signatures streamed with them;
    - ``max_kept``: what the turn keeps verbatim for its ``items``, as JSON characters, the
      turn together: Responses items other than calls (a final item replaces what its index
      held), Anthropic and Bedrock blocks other than tool calls and their citations, Gemini
      parts other than text and calls, and the signatures and other keys kept with those (a
      call is bounded by ``max_calls`` and the argument limits); Chat keeps none;
    - ``max_identifier``: one id, name (joined fragments included), type or finish_reason;
    - ``max_event``: one server-sent event, and one line of the event stream (``from_sse``).
    """

    max_call_arguments: int = 4 * 1024 * 1024
    max_turn_arguments: int = 16 * 1024 * 1024
    max_calls: int = 128
    max_depth: int = 128
    max_event: int = 64 * 1024 * 1024
    max_text: int = 16 * 1024 * 1024
    max_kept: int = 16 * 1024 * 1024
    max_identifier: int = 1024
    max_choices: int = 128


@documented_state
@dataclass(frozen=True, slots=True)
class Policy:
    """What to accept, repair or refuse. The default refuses every ambiguous deviation.

    Each switch opts into one recovery of the provider-quirk catalogue (item number given):

    - ``require_finish_reason`` (16): a stream without any finish_reason is an error.
    - ``accept_clean_end`` (16): accept a missing finish_reason when every call's arguments
      are one complete JSON object (the turn keeps ``finish_reason=None``); on Gemini, take a
      streamed call the stream never closed as complete when none of its values was left
      open (``implicitly_closed_call``).
    - ``split_reused_index`` (2): a new id on an index that holds another id starts a new call
      (Ollama, vLLM, SGLang send every parallel call as index 0).
    - ``keep_first_id`` (6): an id that changes inside one call keeps the first one.
    - ``synthesize_missing_ids`` (8): a call without id gets ``"call_rx_<choice>_<index>"``.
    - ``join_split_names`` (10): a name fragment that differs from the name so far is appended
      while no argument has arrived (Gemini streams ``get_wea`` + ``ther``).
    - ``object_arguments`` (12): arguments sent as a JSON object (not a string) are accepted
      as the call's only payload and serialised once.
    - ``drop_resent_arguments`` (13): a fragment equal to everything received so far is a resend
      and dropped; a fragment that starts with everything received so far replaces it (cumulative
      snapshots).
    - ``final_arguments_win``: a final value of the arguments (Responses ``.done``,
      ``output_item.done``, ``response.completed``) that contradicts the streamed fragments
      replaces them instead of being refused.
    - ``accept_tool_calls_finish_without_calls`` (15): ``finish_reason="tool_calls"`` with no
      tool call streamed is accepted instead of refused.
    - ``reject_duplicate_keys``: an argument object with a repeated key is invalid (a tool
      reading the first key while a logger reads the last is an attack surface).
    - ``tools``: the declared tool names, each with its JSON schema or ``None`` (build it with
      ``with_tools(request_tools)``); an unknown name is an ``UnknownToolError`` the moment it
      arrives. ``validate_arguments`` checks the parsed arguments against the schemas (needs
      the ``schema`` extra, ``jsonschema``).
    """

    require_finish_reason: bool = True
    accept_clean_end: bool = False
    split_reused_index: bool = False
    keep_first_id: bool = False
    synthesize_missing_ids: bool = False
    join_split_names: bool = False
    object_arguments: bool = False
    drop_resent_arguments: bool = False
    accept_tool_calls_finish_without_calls: bool = False
    final_arguments_win: bool = False
    reject_duplicate_keys: bool = False
    tools: Mapping[str, Mapping[str, Any] | None] | None = None
    validate_arguments: bool = False
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self) -> None:
        if self.validate_arguments:
            try:
                import jsonschema  # noqa: F401
            except ImportError as exc:
                raise ImportError(
                    "validate_arguments needs jsonschema: pip install 'rxtoolcalls[schema]'"
                ) from exc
            for name, schema in (self.tools or {}).items():
                if schema is not None:
                    check_schema(name, schema)

    def with_tools(self, tools: object) -> Policy:
        """A copy that knows the request's declared tools (the ``tools=`` list sent to the API).

        Accepts any wire's declarations: Chat's ``{"type": "function", "function": {"name",
        "parameters"}}``, Responses' ``{"type": "function", "name", "parameters"}``,
        Anthropic's ``{"name", "input_schema"}``, Gemini's ``{"functionDeclarations": [...]}``,
        Bedrock's ``{"toolSpec": {"name", "inputSchema": {"json"}}}``, or plain names. A tool
        the provider runs (web search, code execution, Bedrock's ``systemTool``) declares no
        client tool and is passed over. A declaration no wire reads is a ``TypeError``.
        """
        from .wires import WIRES  # the wires import this module

        declared: dict[str, Mapping[str, Any] | None] = {}
        if not isinstance(tools, list | tuple):
            raise TypeError("tools must be the list of tools sent with the request")
        for tool in tools:
            if isinstance(tool, str):
                declared[tool] = None
                continue
            if not isinstance(tool, Mapping):
                raise TypeError(f"a tool must be a mapping or a name, got {type(tool).__name__}")
            found = next(
                (named for spec in WIRES if (named := spec.tool_schemas(tool)) is not None), None
            )
            if found is None and isinstance(tool.get("name"), str):
                found = [(tool["name"], None)]  # a name alone: known, with no schema
            if found is None:
                raise TypeError(f"a tool without a function name: {tool!r}")
            for name, schema in found:
                declared[name] = schema if isinstance(schema, Mapping) else None
        return replace(self, tools=declared)

    @property
    def needs_piece_checks(self) -> bool:
        """Whether argument fragments need more than counting (the hot path's fast case)."""
        return self.drop_resent_arguments or self.object_arguments or self.join_split_names


DEFAULT = Policy()
"""Safe: accept every unambiguous deviation, refuse every ambiguous or dangerous one."""

LENIENT = Policy(
    accept_clean_end=True,
    split_reused_index=True,
    keep_first_id=True,
    synthesize_missing_ids=True,
    join_split_names=True,
    object_arguments=True,
    drop_resent_arguments=True,
    accept_tool_calls_finish_without_calls=True,
    final_arguments_win=True,
)
"""Every recovery of the catalogue; each one that fires is counted in ``turn.normalizations``."""


PolicyName: TypeAlias = Literal["default", "lenient"]
"""What every operator accepts in place of a ``Policy``: the name of ``DEFAULT`` or ``LENIENT``."""

_NAMED: dict[str, Policy] = {"default": DEFAULT, "lenient": LENIENT}


def named_policy(policy: Policy | PolicyName | None) -> Policy:
    """``policy`` itself, the policy of that name, or ``DEFAULT`` for ``None``.

    Raises ``ValueError`` for another name and ``TypeError`` for anything else, at once (an
    operator calls this when it is built, not when the stream runs).
    """
    if policy is None:
        return DEFAULT
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str):
        found = _NAMED.get(policy.lower())
        if found is None:
            shown = policy if len(policy) <= 32 else policy[:32] + "…"
            raise ValueError(f"no policy is named {shown!r}: use 'default', 'lenient' or a Policy")
        return found
    raise TypeError(f"policy must be a Policy, 'default' or 'lenient', got {type(policy).__name__}")
