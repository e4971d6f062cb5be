"""How much of each tool result an agent gets to see: the budget policy.

A :class:`Policy` is a frozen value. Its defaults come from the seeds; a
project can change them in ``[tool.toolbudget]`` of its ``pyproject.toml`` or
in a ``toolbudget.toml``, code can pass its own values to :meth:`Policy.load`,
and environment variables override all of these, because whoever runs the
agent must be able to tighten a budget without touching the code.

Caps compose instead of defeating each other: a tool's own cap *replaces* the
per-result cap for that tool (an 80k cap on file reads means a 70k read goes
through whole), and the per-turn budget is enforced on top of that.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import InputError
from .jsonio import type_name
from .marker import RECALL_TOOL, is_recall_tool
from .recall import MIN_PAGE_CHARS

__all__ = ["DEFAULT_TOOL_CAPS", "Policy"]

# Tool names used by Claude Code, Codex, Gemini CLI, OpenHands, SWE-agent and others, by role.
FILE_READ_TOOLS = (
    "Read",
    "read_file",
    "ReadFile",
    "read_many_files",
    "view_file",
    "open",
    "NotebookRead",
    "fs_read",
    "cat",
)
SEARCH_TOOLS = (
    "Grep",
    "grep",
    "search_dir",
    "search_file",
    "search_file_content",
    "rg",
    "ripgrep",
    "codebase_search",
    "find_in_files",
    "WebSearch",
    "web_search",
)
LISTING_TOOLS = (
    "Glob",
    "glob",
    "LS",
    "ls",
    "list_directory",
    "list_dir",
    "list_files",
    "find_file",
    "tree",
)

FILE_READ_CAP = 80_000
SEARCH_CAP = 60_000
LISTING_CAP = 50_000


def _default_caps() -> Mapping[str, int]:
    caps: dict[str, int] = {}
    caps.update(dict.fromkeys(LISTING_TOOLS, LISTING_CAP))
    caps.update(dict.fromkeys(SEARCH_TOOLS, SEARCH_CAP))
    caps.update(dict.fromkeys(FILE_READ_TOOLS, FILE_READ_CAP))
    return MappingProxyType(caps)


DEFAULT_TOOL_CAPS = _default_caps()


@dataclass(frozen=True, slots=True)
class Policy:
    """Every budget setting. Construct with :meth:`load` to honour files and environment."""

    result_max_chars: int = 20_000
    """Cap for one result of a tool with no cap of its own."""
    turn_budget_chars: int = 200_000
    """Cap for all results answering one assistant turn, enforced largest result first."""
    tool_caps: Mapping[str, int] = field(default_factory=lambda: DEFAULT_TOOL_CAPS)
    """Per-tool caps; a tool's cap replaces ``result_max_chars`` for it."""
    exempt_tools: frozenset[str] = frozenset({RECALL_TOOL})
    """Tools never cut by the turn budget, bounded only by their own cap. The recall tool always is."""
    error_max_chars: int = 50_000
    """Cap for results flagged as errors, and for stderr: errors are kept whole up to here."""
    preview_head_chars: int = 4_000
    preview_tail_chars: int = 1_000
    store: str | None = None
    """Archive store URL (``dir:PATH``, ``sqlite:PATH``, ``redis://...``, ``memory:``).

    ``None`` is the session workspace, a private directory in the user's cache dir."""
    store_timeout: float = 1.0
    """Seconds one request may wait for its archive store in all; a store slower than that is
    skipped (its cuts say the rest could not be kept) until it answers again."""
    recall_max_chars: int = 8_000
    """The page size of a recall answer."""

    microcompact_truncate_turns: int = 2
    """Age (assistant turns since the call) at which an old result becomes a head-and-tail preview."""
    microcompact_summarize_turns: int = 4
    """Age at which an old result becomes a one-line summary."""
    microcompact_min_chars: int = 3_000
    """Only results whose original is longer than this are compacted."""
    microcompact_head_chars: int = 2_000
    microcompact_tail_chars: int = 500
    compaction: str = "cache-aware"
    """``cache-aware`` (compact in batches the cache can afford), ``eager`` (every turn), or ``off``."""
    compact_clear_at_least: int = 4_000
    """The fewest characters a compaction event must reclaim (a floor under the cost model)."""
    compact_high_watermark: float = 0.8
    """Share of the context window at which an event fires whatever the cost."""
    compact_low_watermark: float = 0.6
    """Share of the context window an event brings the history down to."""
    context_window_tokens: int | None = None
    """The model's window; known per model name when left out."""

    max_recovery_attempts: int = 3
    """How many smaller histories to try after the provider says the prompt is too long."""
    emergency_keep_messages: int = 10
    """Messages kept after the task at recovery level 2 (level 3 keeps 4)."""
    max_token_escalations: int = 2
    """How many times ``max_tokens`` is doubled when an answer is cut off."""
    max_output_tokens: int | None = None
    """The model's output cap for escalation; known per model name when left out."""

    def __post_init__(self) -> None:
        for name in (
            "result_max_chars",
            "turn_budget_chars",
            "error_max_chars",
            "recall_max_chars",
            "emergency_keep_messages",
        ):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be a positive number of characters, not {getattr(self, name)}")
        for name in (
            "preview_head_chars",
            "preview_tail_chars",
            "microcompact_head_chars",
            "microcompact_tail_chars",
        ):
            if getattr(self, name) < 0:
                raise InputError(f"{name} cannot be negative")
        if self.recall_max_chars < MIN_PAGE_CHARS:
            raise InputError(
                f"recall_max_chars must be at least {MIN_PAGE_CHARS}, to hold a page's header and "
                f"the pointer to the next page, not {self.recall_max_chars}"
            )
        for name in ("context_window_tokens", "max_output_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InputError(f"{name} must be a positive number of tokens, not {value}")
        if self.microcompact_truncate_turns < 1:
            raise InputError(
                "microcompact_truncate_turns must be at least 1: a result is compacted once moved past"
            )
        if self.microcompact_min_chars < 0 or self.compact_clear_at_least < 0:
            raise InputError("microcompact_min_chars and compact_clear_at_least cannot be negative")
        if self.max_recovery_attempts < 0 or self.max_token_escalations < 0:
            raise InputError("max_recovery_attempts and max_token_escalations cannot be negative")
        if not 0 < self.store_timeout < float("inf"):
            raise InputError(
                f"store_timeout must be a positive number of seconds, not {self.store_timeout!r}"
            )
        if self.compaction not in COMPACTION_MODES:
            raise InputError(
                f"compaction must be one of {', '.join(COMPACTION_MODES)}, not {self.compaction!r}"
            )
        if not 0 < self.compact_low_watermark <= self.compact_high_watermark <= 1:
            raise InputError("the compaction watermarks must satisfy 0 < low <= high <= 1")
        if self.microcompact_summarize_turns < self.microcompact_truncate_turns:
            raise InputError("microcompact_summarize_turns must not be below microcompact_truncate_turns")
        if not isinstance(self.tool_caps, MappingProxyType):
            object.__setattr__(self, "tool_caps", MappingProxyType(dict(self.tool_caps)))
        exempt = frozenset(self.exempt_tools) | {RECALL_TOOL}
        object.__setattr__(self, "exempt_tools", exempt)

    # --- what the budget code asks -----------------------------------------------------

    def cap_for(self, tool: str | None, *, is_error: bool = False) -> int:
        """The cap of one result of ``tool``: its own cap, or the per-result cap.

        An error result gets at least the error cap, since a cut stack trace
        costs more calls than it saves characters.
        """
        cap = self.tool_caps.get(tool, self.result_max_chars) if tool else self.result_max_chars
        return max(cap, self.error_max_chars) if is_error else cap

    def exempt(self, tool: str | None) -> bool:
        return tool is not None and (tool in self.exempt_tools or is_recall_tool(tool))

    @property
    def preview_chars(self) -> int:
        return self.preview_head_chars + self.preview_tail_chars

    @property
    def microcompact_head_ratio(self) -> float:
        total = self.microcompact_head_chars + self.microcompact_tail_chars
        return self.microcompact_head_chars / total if total else 0.8

    @property
    def head_ratio(self) -> float:
        total = self.preview_chars
        return self.preview_head_chars / total if total else 0.8

    def fingerprint(self) -> str:
        """A stable text naming every setting that changes what the model sees."""
        caps = ",".join(f"{k}={v}" for k, v in sorted(self.tool_caps.items()))
        return "|".join(
            (
                str(self.result_max_chars),
                str(self.turn_budget_chars),
                caps,
                ",".join(sorted(self.exempt_tools)),
                str(self.error_max_chars),
                str(self.preview_head_chars),
                str(self.preview_tail_chars),
                str(self.recall_max_chars),
                str(self.microcompact_truncate_turns),
                str(self.microcompact_summarize_turns),
                str(self.microcompact_min_chars),
                str(self.microcompact_head_chars),
                str(self.microcompact_tail_chars),
                self.compaction,
                str(self.compact_clear_at_least),
                str(self.compact_high_watermark),
                str(self.compact_low_watermark),
                str(self.context_window_tokens),
            )
        )

    def scaled(self, factor: float) -> Policy:
        """The same policy with every budget multiplied by ``factor`` (recovery tightens budgets)."""

        def scale(value: int) -> int:
            return max(1, int(value * factor))

        return replace(
            self,
            result_max_chars=scale(self.result_max_chars),
            turn_budget_chars=scale(self.turn_budget_chars),
            tool_caps={k: scale(v) for k, v in self.tool_caps.items()},
            error_max_chars=scale(self.error_max_chars),
            preview_head_chars=scale(self.preview_head_chars),
            preview_tail_chars=scale(self.preview_tail_chars),
        )

    # --- loading ---------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        root: str | os.PathLike[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        **values: Any,
    ) -> Policy:
        """Defaults, then ``pyproject.toml`` and ``toolbudget.toml`` in ``root`` (the working
        directory by default), then ``values`` given in code, then the environment."""
        base = Path(root) if root is not None else Path.cwd()
        layers: list[dict[str, Any]] = []
        pyproject = base / "pyproject.toml"
        if pyproject.is_file():
            tool = _read_toml(pyproject).get("tool", {})
            layers.append(_section(tool.get("toolbudget", {}) if isinstance(tool, dict) else tool, pyproject))
        own = base / "toolbudget.toml"
        if own.is_file():
            data = _read_toml(own)
            layers.append(_section(data.get("toolbudget", data), own))
        layers.append(_section(values, "the arguments"))
        layers.append(_from_env(os.environ if env is None else env))
        settings: dict[str, Any] = {}
        caps: dict[str, int] = {}
        for layer in layers:
            # Per-tool caps add up across layers: each names its own tools.
            caps.update(layer.pop("tool_caps", {}))
            settings.update(layer)
        settings["tool_caps"] = caps
        return cls._build(settings)

    @classmethod
    def _build(cls, settings: Mapping[str, Any]) -> Policy:
        values = dict(settings)
        caps = dict(DEFAULT_TOOL_CAPS)
        caps.update(values.pop("tool_caps", {}))
        values["tool_caps"] = caps
        if "exempt_tools" in values:
            values["exempt_tools"] = frozenset(values["exempt_tools"])
        return cls(**values)


COMPACTION_MODES = ("cache-aware", "eager", "off")

_INT_FIELDS = {
    "max_recovery_attempts",
    "emergency_keep_messages",
    "max_token_escalations",
    "microcompact_truncate_turns",
    "microcompact_summarize_turns",
    "microcompact_min_chars",
    "microcompact_head_chars",
    "microcompact_tail_chars",
    "compact_clear_at_least",
    "result_max_chars",
    "turn_budget_chars",
    "error_max_chars",
    "preview_head_chars",
    "preview_tail_chars",
    "recall_max_chars",
}
_FLOAT_FIELDS = {"compact_high_watermark", "compact_low_watermark"}
_FIELD_NAMES = {f.name for f in fields(Policy)}

ENV = {
    "TOOLBUDGET_RESULT_MAX_CHARS": "result_max_chars",
    "TOOLBUDGET_TURN_BUDGET_CHARS": "turn_budget_chars",
    "TOOLBUDGET_TOOL_CAPS": "tool_caps",
    "TOOLBUDGET_EXEMPT_TOOLS": "exempt_tools",
    "TOOLBUDGET_ERROR_MAX_CHARS": "error_max_chars",
    "TOOLBUDGET_PREVIEW_HEAD_CHARS": "preview_head_chars",
    "TOOLBUDGET_PREVIEW_TAIL_CHARS": "preview_tail_chars",
    "TOOLBUDGET_STORE": "store",
    "TOOLBUDGET_STORE_TIMEOUT": "store_timeout",
    "TOOLBUDGET_RECALL_MAX_CHARS": "recall_max_chars",
    "TOOLBUDGET_MICROCOMPACT_TRUNCATE_TURNS": "microcompact_truncate_turns",
    "TOOLBUDGET_MICROCOMPACT_SUMMARIZE_TURNS": "microcompact_summarize_turns",
    "TOOLBUDGET_MICROCOMPACT_MIN_CHARS": "microcompact_min_chars",
    "TOOLBUDGET_COMPACTION": "compaction",
    "TOOLBUDGET_COMPACT_CLEAR_AT_LEAST": "compact_clear_at_least",
    "TOOLBUDGET_COMPACT_HIGH_WATERMARK": "compact_high_watermark",
    "TOOLBUDGET_COMPACT_LOW_WATERMARK": "compact_low_watermark",
    "TOOLBUDGET_CONTEXT_WINDOW_TOKENS": "context_window_tokens",
    "TOOLBUDGET_MAX_RECOVERY_ATTEMPTS": "max_recovery_attempts",
    "TOOLBUDGET_EMERGENCY_KEEP_MESSAGES": "emergency_keep_messages",
    "TOOLBUDGET_MAX_TOKEN_ESCALATIONS": "max_token_escalations",
    "TOOLBUDGET_MAX_OUTPUT_TOKENS": "max_output_tokens",
}


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _section(section: Any, where: object) -> dict[str, Any]:
    if not isinstance(section, Mapping):
        raise InputError(f"{where}: the toolbudget settings must be a table, not {type_name(section)}")
    out: dict[str, Any] = {}
    for key, value in section.items():
        name = key.replace("-", "_")
        if name not in _FIELD_NAMES:
            raise InputError(f"{where}: unknown toolbudget setting {key!r}")
        out[name] = _check(name, value, where)
    return out


def _check(name: str, value: Any, where: object) -> Any:
    if name in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}: {name} must be a whole number of characters, not {value!r}")
        return value
    if name == "tool_caps":
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0
            for k, v in value.items()
        ):
            raise InputError(f"{where}: tool_caps must map tool names to positive character counts")
        return dict(value)
    if name == "exempt_tools":
        if (
            isinstance(value, str)
            or not isinstance(value, Iterable)
            or not all(isinstance(v, str) for v in value)
        ):
            raise InputError(f"{where}: exempt_tools must be a list of tool names")
        return list(value)
    if name in _FLOAT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{where}: {name} must be a share of the window such as 0.8, not {value!r}")
        return float(value)
    if name in ("context_window_tokens", "max_output_tokens"):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"{where}: {name} must be a positive number of tokens")
        return value
    if name == "compaction":
        if value not in COMPACTION_MODES:
            raise InputError(
                f"{where}: compaction must be one of {', '.join(COMPACTION_MODES)}, not {value!r}"
            )
        return value
    if name == "store_timeout":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{where}: store_timeout must be a number of seconds, not {value!r}")
        return float(value)
    if name == "store":
        if value is not None and not isinstance(value, str):
            raise InputError(f"{where}: store must be a store URL")
        return value
    return value


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for variable, name in ENV.items():
        raw = env.get(variable)
        if raw is None or raw.strip() == "":
            continue
        raw = raw.strip()
        if name in _INT_FIELDS or name in ("context_window_tokens", "max_output_tokens"):
            try:
                out[name] = int(raw.replace("_", ""))
            except ValueError:
                raise InputError(f"{variable} must be a whole number, not {raw!r}") from None
        elif name in _FLOAT_FIELDS:
            try:
                out[name] = float(raw)
            except ValueError:
                raise InputError(
                    f"{variable} must be a share of the window such as 0.8, not {raw!r}"
                ) from None
        elif name == "tool_caps":
            out[name] = _parse_caps(raw, variable)
        elif name == "exempt_tools":
            out[name] = [t.strip() for t in raw.split(",") if t.strip()]
        elif name == "compaction":
            if raw not in COMPACTION_MODES:
                raise InputError(f"{variable} must be one of {', '.join(COMPACTION_MODES)}, not {raw!r}")
            out[name] = raw
        elif name == "store_timeout":
            try:
                out[name] = float(raw)
            except ValueError:
                raise InputError(f"{variable} must be a number of seconds, not {raw!r}") from None
        else:
            out[name] = raw
    return out


def _parse_caps(raw: str, variable: str) -> dict[str, int]:
    caps: dict[str, int] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        try:
            chars = int(value.strip().replace("_", ""))
        except ValueError:
            chars = 0
        if not sep or not name.strip() or chars < 1:
            raise InputError(f"{variable} must look like 'Read=80000,Grep=60000', not {item!r}")
        caps[name.strip()] = chars
    return caps
