"""Assemble streamed LLM tool calls into complete, validated turns with ReactiveX operators."""

from ._assembler import Assembler
from ._errors import (
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
)
from ._policy import DEFAULT, LENIENT, Limits, Policy
from ._types import (
    AssistantTurn,
    ChoiceEnd,
    StreamEnd,
    ToolCall,
    ToolCallBuffer,
    ToolCallStarted,
)
from .operators import (
    Chunk,
    ToolCallGroup,
    assemble,
    assemble_choices,
    atomic_batch,
    atomic_choices,
    concat_arguments,
    group_by_index,
    on_finish_reason,
    progress,
)
from .sources import from_async_iterable, from_jsonl

__version__ = "0.1.0"

__all__ = [
    "DEFAULT",
    "LENIENT",
    "Assembler",
    "AssistantTurn",
    "ChoiceEnd",
    "Chunk",
    "ContentFilteredError",
    "InvalidArgumentsError",
    "LimitExceededError",
    "Limits",
    "MalformedChunkError",
    "MultipleChoicesError",
    "Policy",
    "ProviderError",
    "StreamEnd",
    "StreamInterruptedError",
    "ToolCall",
    "ToolCallBuffer",
    "ToolCallGroup",
    "ToolCallStarted",
    "ToolCallStreamError",
    "TruncatedToolCallError",
    "UnknownToolError",
    "__version__",
    "assemble",
    "assemble_choices",
    "atomic_batch",
    "atomic_choices",
    "concat_arguments",
    "from_async_iterable",
    "from_jsonl",
    "group_by_index",
    "on_finish_reason",
    "progress",
]
