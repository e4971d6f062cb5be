"""How much of each tool result an agent gets to see: the budget policy.

A :class:`Policy` is a frozen value. Its defaults come from the seeds; a
project can change them in ``[tool.toolbudget]`` of its ``pyproject.toml`` or
in a ``toolbudget.toml`` (found from any subdirectory, see
:func:`config_files`), code can pass its own values to :meth:`Policy.load`,
and environment variables override all of these, because whoever runs the
agent must be able to tighten a budget without touching the code. A command
line's flags come last (:meth:`Policy.load_with_sources`, which also says
where each value came from, for ``toolbudget config``).

Caps compose instead of defeating each other: a tool's own cap *replaces* the
per-result cap for that tool (an 80k cap on file reads means a 70k read goes
through whole), and the per-turn budget is enforced on top of that.

Each setting is declared once, as a field made by :func:`setting`: its kind,
its bounds, whether it is in the fingerprint and whether recovery scales it,
its meaning and its default in words. The environment variable names, the
checks of files and code, the range checks, the fingerprint,
:meth:`Policy.scaled`, the warning for a misspelt variable and the README's
table (:func:`settings_table`) are all read from the fields, so they cannot
drift apart.
"""

from __future__ import annotations

import difflib
import os
import tomllib
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, Self, TypeVar

from .errors import InputError
from .jsonio import type_name
from .marker import RECALL_TOOL, is_recall_tool
from .recall import MIN_PAGE_CHARS
from .tools import FILE_READ_TOOLS, LISTING_TOOLS, SEARCH_TOOLS

__all__ = [
    "DEFAULT_TOOL_CAPS",
    "ConfigWarning",
    "Policy",
    "SettingDoc",
    "Source",
    "Sourced",
    "config_files",
    "setting_docs",
    "settings_table",
]

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

COMPACTION_MODES = ("cache-aware", "eager", "off")

P = TypeVar("P", bound="Policy")


# --- kinds of setting: how each is read, checked and fingerprinted ----------------------


@dataclass(frozen=True, slots=True)
class _Kind:
    """What values one kind of setting takes, and how it is read from text and files."""

    def read(self, raw: str, variable: str) -> Any:
        """The value of an environment variable's text."""
        return raw

    def check(self, value: Any, label: str) -> Any:
        """A value from a file or from code, checked for its type; ``label`` names it in errors."""
        return value

    def invalid(self, value: Any, spec: _Spec) -> str | None:
        """Why ``value`` is out of range for the policy (``None``: it is not)."""
        return None

    def show(self, value: Any) -> str:
        """The value as the fingerprint writes it."""
        return str(value)


def _whole(raw: str, variable: str) -> int:
    try:
        return int(raw.replace("_", ""))
    except ValueError:
        raise InputError(f"{variable} must be a whole number, not {raw!r}") from None


@dataclass(frozen=True, slots=True)
class _Count(_Kind):
    """A whole number of ``unit``, at least the setting's ``least``."""

    unit: str = "characters"

    def read(self, raw: str, variable: str) -> Any:
        return _whole(raw, variable)

    def check(self, value: Any, label: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{label} must be a whole number of {self.unit}, not {value!r}")
        return value

    def invalid(self, value: Any, spec: _Spec) -> str | None:
        if spec.least is None or value >= spec.least:
            return None
        if spec.why:
            return f"{spec.name} must be at least {spec.least}, {spec.why}, not {value}"
        if spec.least == 1:
            return f"{spec.name} must be a positive number of {self.unit}, not {value}"
        return f"{spec.name} cannot be negative, not {value}"


@dataclass(frozen=True, slots=True)
class _Tokens(_Kind):
    """A positive number of tokens, or ``None`` for the one known per model."""

    def read(self, raw: str, variable: str) -> Any:
        return _whole(raw, variable)

    def check(self, value: Any, label: str) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"{label} must be a positive number of tokens")
        return value

    def invalid(self, value: Any, spec: _Spec) -> str | None:
        if value is not None and value < 1:
            return f"{spec.name} must be a positive number of tokens, not {value}"
        return None


@dataclass(frozen=True, slots=True)
class _Number(_Kind):
    """A number: a share of the window, or seconds."""

    what: str = "a share of the window such as 0.8"

    def read(self, raw: str, variable: str) -> Any:
        try:
            return float(raw)
        except ValueError:
            raise InputError(f"{variable} must be {self.what}, not {raw!r}") from None

    def check(self, value: Any, label: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{label} must be {self.what}, not {value!r}")
        return float(value)


@dataclass(frozen=True, slots=True)
class _Seconds(_Number):
    what: str = "a number of seconds"

    def invalid(self, value: Any, spec: _Spec) -> str | None:
        if 0 < value < float("inf"):
            return None
        return f"{spec.name} must be a positive number of seconds, not {value!r}"


@dataclass(frozen=True, slots=True)
class _Caps(_Kind):
    """Tool names to positive character counts (``Read=80000,Grep=60000`` in the environment)."""

    def read(self, raw: str, variable: str) -> Any:
        return _parse_caps(raw, variable)

    def check(self, value: Any, label: str) -> Any:
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0
            for k, v in value.items()
        ):
            raise InputError(f"{label} must map tool names to positive character counts")
        return dict(value)

    def show(self, value: Any) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))


@dataclass(frozen=True, slots=True)
class _Tools(_Kind):
    """A set of tool names (comma-separated in the environment)."""

    def read(self, raw: str, variable: str) -> Any:
        return [t.strip() for t in raw.split(",") if t.strip()]

    def check(self, value: Any, label: str) -> Any:
        if (
            isinstance(value, str)
            or not isinstance(value, Iterable)
            or not all(isinstance(v, str) for v in value)
        ):
            raise InputError(f"{label} must be a list of tool names")
        return list(value)

    def show(self, value: Any) -> str:
        return ",".join(sorted(value))


@dataclass(frozen=True, slots=True)
class _Mode(_Kind):
    """One of :data:`COMPACTION_MODES`."""

    def _known(self, value: Any, label: str) -> Any:
        if value not in COMPACTION_MODES:
            raise InputError(f"{label} must be one of {', '.join(COMPACTION_MODES)}, not {value!r}")
        return value

    def read(self, raw: str, variable: str) -> Any:
        return self._known(raw, variable)

    def check(self, value: Any, label: str) -> Any:
        return self._known(value, label)

    def invalid(self, value: Any, spec: _Spec) -> str | None:
        if value in COMPACTION_MODES:
            return None
        return f"{spec.name} must be one of {', '.join(COMPACTION_MODES)}, not {value!r}"


@dataclass(frozen=True, slots=True)
class _Url(_Kind):
    """A store URL, or ``None``."""

    def check(self, value: Any, label: str) -> Any:
        if value is not None and not isinstance(value, str):
            raise InputError(f"{label} must be a store URL")
        return value


@dataclass(frozen=True, slots=True)
class _Price(_Kind):
    """A price model's name (see :mod:`toolbudget.prices`), a JSON file of one, or ``None``."""

    def check(self, value: Any, label: str) -> Any:
        if value is not None and not isinstance(value, str):
            raise InputError(f"{label} must name a price model or a JSON file of one")
        return value

    def invalid(self, value: Any, spec: _Spec) -> str | None:
        if value is None:
            return None
        from .prices import load_price

        try:
            load_price(value)
        except InputError as exc:
            return f"{spec.name}: {exc}"
        return None


_KINDS: dict[str, _Kind] = {
    "chars": _Count("characters"),
    "turns": _Count("turns"),
    "attempts": _Count("attempts"),
    "messages": _Count("messages"),
    "tokens": _Tokens(),
    "share": _Number(),
    "seconds": _Seconds(),
    "caps": _Caps(),
    "tools": _Tools(),
    "mode": _Mode(),
    "url": _Url(),
    "price": _Price(),
}
"""The kinds of setting, by the name :func:`setting` takes."""


def setting(
    default: Any = MISSING,
    kind: str = "chars",
    *,
    least: int | None = None,
    why: str = "",
    fingerprint: bool = True,
    scales: bool = False,
    factory: Any = MISSING,
    doc: str = "",
    shown: str = "",
) -> Any:
    """A :class:`Policy` field and what is known of it, in one place.

    ``kind`` says how the setting is read from files and the environment and
    what values it takes (see :data:`_KINDS`); ``least`` is the smallest
    value allowed (``why`` says why, when the bound is not obvious);
    ``fingerprint`` says whether it changes what the model sees, and
    ``scales`` whether it is a budget :meth:`Policy.scaled` tightens. Its
    environment variable is ``TOOLBUDGET_`` and its name in capitals. ``doc``
    is its meaning in one line and ``shown`` its default in words where the
    value alone says little (``None``: known per model name), both for the
    README's table and ``toolbudget config``. Every table the loader, the
    checks and the documentation use is derived from these, so a new field
    needs nothing else.
    """
    if kind not in _KINDS:
        raise TypeError(f"unknown kind of setting {kind!r}")
    metadata = {
        "kind": kind,
        "least": least,
        "why": why,
        "fingerprint": fingerprint,
        "scales": scales,
        "doc": doc,
        "shown": shown,
    }
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, slots=True)
class Policy:
    """Every budget setting. Construct with :meth:`load` to honour files and environment."""

    result_max_chars: int = setting(
        20_000, least=1, scales=True, doc="cap for one result of a tool with no cap of its own"
    )
    turn_budget_chars: int = setting(
        200_000,
        least=1,
        scales=True,
        doc="cap for all results answering one assistant turn, enforced largest result first",
    )
    tool_caps: Mapping[str, int] = setting(
        kind="caps",
        scales=True,
        factory=lambda: DEFAULT_TOOL_CAPS,
        doc="per-tool caps, `name=chars,...`, added to the defaults; a tool's cap replaces "
        "`result_max_chars` for it",
        shown="file reads 80000, searches 60000, listings 50000",
    )
    exempt_tools: frozenset[str] = setting(
        frozenset({RECALL_TOOL}),
        "tools",
        doc="tools never cut by the turn budget, bounded only by their own cap (the recall tool always is)",
        shown="the recall tool",
    )
    error_max_chars: int = setting(
        50_000,
        least=1,
        scales=True,
        doc="cap for results flagged as errors, and for stderr: errors are kept whole up to here",
    )
    preview_head_chars: int = setting(
        4_000, least=0, scales=True, doc="characters a preview keeps from the start of a result"
    )
    preview_tail_chars: int = setting(
        1_000, least=0, scales=True, doc="characters a preview keeps from the end of a result"
    )
    store: str | None = setting(
        None,
        "url",
        fingerprint=False,
        doc="archive store URL: `dir:PATH`, `sqlite:PATH`, `redis://...` or `memory:`",
        shown="the session workspace in the user's cache dir",
    )
    store_timeout: float = setting(
        1.0,
        "seconds",
        fingerprint=False,
        doc="seconds one request may wait for its archive store in all; a store slower than that is "
        "skipped (its cuts say the rest could not be kept) until it answers again",
    )
    recall_max_chars: int = setting(
        8_000,
        least=MIN_PAGE_CHARS,
        why="to hold a page's header and the pointer to the next page",
        doc="the page size of a recall answer",
    )

    microcompact_truncate_turns: int = setting(
        2,
        "turns",
        least=1,
        why="since a result is compacted once moved past",
        doc="age (assistant turns since the call) at which an old result becomes a head-and-tail preview",
    )
    microcompact_summarize_turns: int = setting(
        4, "turns", doc="age at which an old result becomes a one-line summary"
    )
    microcompact_min_chars: int = setting(
        3_000, least=0, doc="only results whose original is longer than this are compacted"
    )
    microcompact_head_chars: int = setting(
        2_000, least=0, doc="characters the head-and-tail preview of an old result keeps from its start"
    )
    microcompact_tail_chars: int = setting(
        500, least=0, doc="characters the head-and-tail preview of an old result keeps from its end"
    )
    compaction: str = setting(
        "cache-aware",
        "mode",
        doc="`cache-aware` (compact in batches the cache can afford), `eager` (every turn) or `off`",
    )
    cache_price: str | None = setting(
        None,
        "price",
        doc="the prompt cache's prices the schedule weighs rewrites with: `anthropic-5m`, "
        "`anthropic-1h`, `openai`, `gemini`, `none` or a JSON file",
        shown="by API and model",
    )
    compact_clear_at_least: int = setting(
        4_000,
        least=0,
        doc="the fewest characters a compaction event must reclaim (a floor under the cost model)",
    )
    compact_high_watermark: float = setting(
        0.8, "share", doc="share of the context window at which a compaction event fires whatever it costs"
    )
    compact_low_watermark: float = setting(
        0.6, "share", doc="share of the context window a compaction event brings the history down to"
    )
    context_window_tokens: int | None = setting(
        None,
        "tokens",
        doc="the model's context window",
        shown="known per model name",
    )

    max_recovery_attempts: int = setting(
        3,
        "attempts",
        least=0,
        fingerprint=False,
        doc="how many smaller histories to try after the provider says the prompt is too long",
    )
    emergency_keep_messages: int = setting(
        10,
        "messages",
        least=1,
        fingerprint=False,
        doc="messages kept after the task at recovery level 2 (level 3 keeps 4)",
    )
    max_token_escalations: int = setting(
        2,
        "attempts",
        least=0,
        fingerprint=False,
        doc="how many times `max_tokens` is doubled when an answer is cut off",
    )
    max_output_tokens: int | None = setting(
        None,
        "tokens",
        fingerprint=False,
        doc="the model's output cap, where escalation stops",
        shown="known per model name",
    )

    def __post_init__(self) -> None:
        for spec in _specs(type(self)):
            problem = spec.kind.invalid(getattr(self, spec.name), spec)
            if problem:
                raise InputError(problem)
        # What no single field can say alone.
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
        """A stable text naming every setting that changes what the model sees (in field order)."""
        return "|".join(
            spec.kind.show(getattr(self, spec.name)) for spec in _specs(type(self)) if spec.fingerprint
        )

    def scaled(self, factor: float) -> Self:
        """The same policy with every budget multiplied by ``factor`` (recovery tightens budgets)."""

        def scale(value: int) -> int:
            return max(1, int(value * factor))

        changes: dict[str, Any] = {}
        for spec in _specs(type(self)):
            if spec.scales:
                value = getattr(self, spec.name)
                changes[spec.name] = (
                    {k: scale(v) for k, v in value.items()} if isinstance(value, Mapping) else scale(value)
                )
        return replace(self, **changes)

    # --- loading ---------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        root: str | os.PathLike[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        **values: Any,
    ) -> Self:
        """Defaults, then the project's ``pyproject.toml`` ``[tool.toolbudget]`` and
        ``toolbudget.toml`` (see :func:`config_files`, searched from ``root``, the working
        directory by default), then ``values`` given in code, then the environment."""
        return cls.load_with_sources(root, env=env, **values).policy

    @classmethod
    def load_with_sources(
        cls,
        root: str | os.PathLike[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        flags: Mapping[str, Any] | None = None,
        **values: Any,
    ) -> Sourced[Self]:
        """:meth:`load`, and where each value came from.

        ``flags`` are a command line's options by setting name (``None``: not
        given); they come last, so a flag wins over the environment. An
        environment variable that starts with ``TOOLBUDGET_`` but names no
        setting is ignored with a :class:`ConfigWarning` naming the closest
        setting, since a typo there would otherwise change nothing silently.
        """
        files = _config(Path(root) if root is not None else Path.cwd())
        layers: list[tuple[Source, dict[str, Any], Mapping[str, str]]] = []
        for path, section in files:
            kind = "toolbudget.toml" if path.name == "toolbudget.toml" else "pyproject"
            layers.append((Source(kind, str(path)), _section(cls, section, path), {}))
        layers.append((Source("arguments", "Policy.load"), _section(cls, values, "the arguments"), {}))
        from_env = _from_env(cls, os.environ if env is None else env)
        layers.append((Source("environment", ""), from_env, _ENV_OF[cls]))
        given = {k: v for k, v in (flags or {}).items() if v is not None}
        layers.append((Source("flag", ""), _section(cls, given, "the flags", flag=True), _FLAG_OF[cls]))
        settings: dict[str, Any] = {}
        caps: dict[str, int] = {}
        sources = {spec.name: Source("default", "") for spec in _specs(cls)}
        for source, layer, names in layers:
            for name in layer:
                where = names.get(name, source.where)
                sources[name] = replace(source, where=where)
            # Per-tool caps add up across layers: each names its own tools.
            caps.update(layer.pop("tool_caps", {}))
            settings.update(layer)
        settings["tool_caps"] = caps
        return Sourced(cls._build(settings), MappingProxyType(sources), tuple(path for path, _ in files))

    @classmethod
    def _build(cls, settings: Mapping[str, Any]) -> Self:
        values = dict(settings)
        caps = dict(DEFAULT_TOOL_CAPS)
        caps.update(values.pop("tool_caps", {}))
        values["tool_caps"] = caps
        if "exempt_tools" in values:
            values["exempt_tools"] = frozenset(values["exempt_tools"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class _Spec:
    """One setting as the loader and the checks see it, from its field."""

    name: str
    env: str
    kind: _Kind
    least: int | None
    why: str
    fingerprint: bool
    scales: bool
    doc: str
    shown: str


_SPECS: dict[type, tuple[_Spec, ...]] = {}


def _specs(cls: type) -> tuple[_Spec, ...]:
    """Every setting of ``cls`` (a :class:`Policy` or a subclass), in field order."""
    known = _SPECS.get(cls)
    if known is None:
        out = []
        for f in fields(cls):
            if "kind" not in f.metadata:
                raise TypeError(f"{cls.__name__}.{f.name} must be declared with setting()")
            meta = f.metadata
            out.append(
                _Spec(
                    f.name,
                    "TOOLBUDGET_" + f.name.upper(),
                    _KINDS[meta["kind"]],
                    meta["least"],
                    meta["why"],
                    meta["fingerprint"],
                    meta["scales"],
                    meta["doc"],
                    meta["shown"],
                )
            )
        known = _SPECS[cls] = tuple(out)
        _ENV_OF[cls] = {spec.name: spec.env for spec in known}
        _FLAG_OF[cls] = {spec.name: "--" + spec.name.replace("_", "-") for spec in known}
    return known


class _Names(dict[type, dict[str, str]]):
    """A table per policy class, made with its specs the first time it is asked for."""

    def __missing__(self, cls: type) -> dict[str, str]:
        _specs(cls)
        return self[cls]


_ENV_OF: dict[type, dict[str, str]] = _Names()
"""Per class: each setting's environment variable."""
_FLAG_OF: dict[type, dict[str, str]] = _Names()
"""Per class: each setting's command-line flag, as ``toolbudget config`` and friends name it."""


ENV = {spec.env: spec.name for spec in _specs(Policy)}
"""Each environment variable and the setting it sets."""


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


def _section(cls: type, section: Any, where: object, *, flag: bool = False) -> dict[str, Any]:
    if not isinstance(section, Mapping):
        raise InputError(f"{where}: the toolbudget settings must be a table, not {type_name(section)}")
    specs = {spec.name: spec for spec in _specs(cls)}
    out: dict[str, Any] = {}
    for key, value in section.items():
        name = key.replace("-", "_")
        if name not in specs:
            raise InputError(f"{where}: unknown toolbudget setting {key!r}")
        label = _FLAG_OF[cls][name] if flag else f"{where}: {name}"
        out[name] = specs[name].kind.check(value, label)
    return out


CONFIG_FILE = "toolbudget.toml"

OTHER_VARIABLES = frozenset({"TOOLBUDGET_SHARED"})
"""``TOOLBUDGET_`` variables that are not settings but are read all the same (where the test
and benchmark data live), so they are not warned about."""


def config_files(start: str | os.PathLike[str] | None = None) -> tuple[Path, ...]:
    """The files whose settings apply in ``start`` (the working directory by default).

    As ruff and pytest do, the search walks up from ``start`` and stops at the
    first directory holding a ``toolbudget.toml`` or a ``pyproject.toml`` with
    a ``[tool.toolbudget]`` table (a ``pyproject.toml`` without one does not
    stop it). Where a directory holds both, both apply and ``toolbudget.toml``
    wins for the settings they both set. The search ends at the top of a git
    checkout (a directory holding ``.git``) or at the filesystem root, so a
    project never picks up the settings of whatever directory it sits in.
    """
    return tuple(path for path, _ in _config(Path(start) if start is not None else Path.cwd()))


def _config(start: Path) -> list[tuple[Path, Any]]:
    here = start.absolute()
    for directory in (here, *here.parents):
        found: list[tuple[Path, Any]] = []
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            tool = _read_toml(pyproject).get("tool", {})
            if not isinstance(tool, dict):
                raise InputError(f"{pyproject}: [tool] must be a table, not {type_name(tool)}")
            if "toolbudget" in tool:
                found.append((pyproject, tool["toolbudget"]))
        own = directory / CONFIG_FILE
        if own.is_file():
            data = _read_toml(own)
            found.append((own, data.get("toolbudget", data)))
        if found or (directory / ".git").exists():
            return found
    return []


_PREFIX = len("TOOLBUDGET_")


def _from_env(cls: type, env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in _specs(cls):
        raw = env.get(spec.env)
        if raw is None or raw.strip() == "":
            continue
        out[spec.name] = spec.kind.read(raw.strip(), spec.env)
    known = set(_ENV_OF[cls].values())
    for variable in sorted(env):
        if variable.startswith("TOOLBUDGET_") and variable not in known | OTHER_VARIABLES:
            # Compared without the prefix they all share, which would make every name look close.
            close = difflib.get_close_matches(variable[_PREFIX:], sorted(k[_PREFIX:] for k in known), n=1)
            hint = (
                f"did you mean TOOLBUDGET_{close[0]}?" if close else "'toolbudget config' lists the settings"
            )
            warnings.warn(
                f"{variable} is not a toolbudget setting and is ignored; {hint}", ConfigWarning, stacklevel=4
            )
    return out


# --- where each value came from -----------------------------------------------------------

SOURCE_KINDS = ("default", "pyproject", "toolbudget.toml", "arguments", "environment", "flag")
"""Where a value can come from, from the weakest to the strongest."""


@dataclass(frozen=True, slots=True)
class Source:
    """Where one setting's value came from: a kind of :data:`SOURCE_KINDS`, and which one.

    ``where`` is the file's path, the environment variable, the flag, or
    ``Policy.load`` for values given in code; empty for a default.
    """

    kind: str
    where: str = ""


@dataclass(frozen=True, slots=True)
class Sourced(Generic[P]):
    """A loaded policy, where each of its settings came from, and the files that were read."""

    policy: P
    sources: Mapping[str, Source]
    files: tuple[Path, ...]


class ConfigWarning(UserWarning):
    """A setting that was given but changes nothing, such as a misspelt ``TOOLBUDGET_`` variable.

    A warning, not an error, because the environment is shared with other
    programs; an unknown key in a settings file, which is ours alone, is an
    :class:`~toolbudget.errors.InputError`.
    """


# --- the settings as the documentation shows them -------------------------------------------


@dataclass(frozen=True, slots=True)
class SettingDoc:
    """One setting as the README's table and ``toolbudget config`` show it."""

    name: str
    env: str
    flag: str
    default: str
    meaning: str


def setting_docs(cls: type = Policy) -> tuple[SettingDoc, ...]:
    """Every setting of ``cls``, in field order: its names, its default in words, its meaning."""
    defaults = cls()
    return tuple(
        SettingDoc(
            spec.name,
            spec.env,
            _FLAG_OF[cls][spec.name],
            spec.shown or show_value(getattr(defaults, spec.name)),
            spec.doc,
        )
        for spec in _specs(cls)
    )


def show_value(value: Any) -> str:
    """A setting's value as a person reads it (``tool_caps`` as ``name=chars,...``)."""
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, (set, frozenset)):
        return ",".join(sorted(value))
    if value is None:
        return "-"
    return str(value)


def settings_table(cls: type = Policy) -> str:
    """The Markdown table of every setting, as the README shows it (one row each)."""
    rows = ["| setting (TOML key) | environment | default | meaning |", "|---|---|---|---|"]
    for doc in setting_docs(cls):
        default = doc.default if " " in doc.default else f"`{doc.default}`"
        rows.append(f"| `{doc.name}` | `{doc.env}` | {default} | {doc.meaning} |")
    return "\n".join(rows) + "\n"


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
