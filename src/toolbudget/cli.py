"""The ``toolbudget`` command.

Exit status: 0 when all is well, 1 when the command worked and found a problem
(violations, an unknown key), 2 when the input cannot be used. Errors are one
line on stderr, never a traceback. When the reader of the output goes away
(``toolbudget convert ... | head``), the command stops quietly with status 141,
as a Unix tool killed by ``SIGPIPE`` does.

``validate``, ``repair`` and ``compact`` read one body, or JSON Lines of them
(what ``convert --all`` writes); see :mod:`toolbudget.cli_input`.

It needs the ``cli`` extra (``click``, and ``rich`` for ``demo``); the
console script starts in :mod:`toolbudget.cli_entry`, which says how to
install them when they are missing.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial, wraps
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from . import wire
from .cli_input import Input, dump, read_bodies, rewritten
from .cli_progress import Bar, progress_option
from .convert import to_request
from .errors import InputError, NotFoundError, StoreError, ToolbudgetError
from .jsonio import dumps
from .pairing import check_request, repair_request
from .policy import COMPACTION_MODES, ConfigWarning, Policy, Sourced, setting_docs, show_value
from .proxy.setup import AGENTS as PROXY_AGENTS
from .proxy.setup import setup_lines
from .recall import key_of, parse_query
from .session import Session
from .store import DirStore, open_store, store_path
from .transcripts import Transcript, TranscriptWarning, load_transcript

F = TypeVar("F", bound=Callable[..., Any])

API_CHOICE = click.Choice(wire.APIS, case_sensitive=False)


class Failure(click.ClickException):
    """A one-line error that exits with status 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"toolbudget: error: {self.format_message()}", err=True)


def fail(message: str) -> NoReturn:
    raise Failure(message)


def friendly(func: F) -> F:
    """Turn our errors and I/O errors into one line and exit status 2."""

    @wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BrokenPipeError:
            reader_gone()
        except ToolbudgetError as exc:
            fail(str(exc))
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            fail(f"{where}{exc.strerror or exc}")
        except MemoryError:
            fail("not enough memory to read the input")

    return run  # type: ignore[return-value]


SIGPIPE_STATUS = 141
"""128 + SIGPIPE: what a shell reports for a Unix tool whose reader went away."""


def reader_gone() -> NoReturn:
    """The reader of stdout closed it: stop without a word (nothing is left to tell it)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the flush at exit finds no broken pipe either
    except (OSError, ValueError):
        pass
    sys.exit(SIGPIPE_STATUS)


def _stdout_console() -> Any:
    """A rich ``Console`` on stdout, laid out for a fixed width when piped, that ends as
    :func:`reader_gone` does when its reader goes away.

    Rich catches the ``BrokenPipeError`` itself and exits with status 1, which
    a script would read as a failure; ``| head`` is no failure.
    """
    from rich.console import Console

    class _Piped(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            reader_gone()

    # Piped or redirected, laid out for a fixed width, so the text is the same everywhere.
    return _Piped(width=None if sys.stdout.isatty() else 120)


def _load(path: str) -> Transcript:
    """The transcript at ``path``, its warnings said on stderr as one line each."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TranscriptWarning)
        loaded = load_transcript(path)
    for line in loaded.warnings:
        click.echo(f"toolbudget: warning: {line}", err=True)
    return loaded


def read_input(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    path = Path(source)
    if path.is_dir():
        fail(f"{source}: is a directory, not a file")
    return path.read_bytes()


def emit(data: bytes) -> None:
    """Write all of ``data`` to stdout.

    A pipe whose reader goes away mid-write takes only part of a large write,
    and the buffered writer returns that count instead of raising; writing on
    is what raises the ``BrokenPipeError`` that ends the command with status
    141, instead of exit 0 with the output silently cut short.
    """
    stream = sys.stdout.buffer
    view = memoryview(data)
    while view:
        written = stream.write(view)
        view = view[len(view) if written is None else written :]
    stream.flush()


def _output_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse, before any work, a file to write that cannot be: a directory, or in no directory.

    Otherwise a long compaction or report would run to the end (and write an
    archive) only to fail at its last step.
    """
    if value is None or value == "-":
        return value
    path = Path(value)
    flag = max(param.opts, key=len)
    if path.is_dir():
        fail(f"{flag} {value} is a directory")
    parent = path.parent
    if not parent.is_dir():
        fail(f"{flag} {value}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        fail(f"{flag} {value} cannot be written")
    return value


def _output_option(what: str) -> Callable[[F], F]:
    """The ``-o/--output`` option of a command that writes ``what``, checked before any work."""
    return click.option(
        "-o", "--output", "out", callback=_output_path, help=f"Where to write {what} (stdout by default)."
    )


def write_output(data: bytes, out: str | None) -> None:
    if out is None or out == "-":
        emit(data if data.endswith(b"\n") else data + b"\n")
    else:
        Path(out).write_bytes(data)


def _apart(inputs: Mapping[str, str], outputs: Mapping[str, str | None]) -> None:
    """Refuse, before any work, a file to write that is an input, or that another output names.

    Each output is written whole after the work, so one naming the input
    (``-o``, ``--report`` or ``--html`` on the session file or body being
    read) would replace what the user gave with the command's answer, and
    two outputs naming one file would leave only the second. Only regular
    files (and paths not yet made) count: ``/dev/null`` may take both.
    """
    seen: dict[Any, str] = {}
    for flag, value in outputs.items():
        if value is None or value == "-":
            continue
        path = Path(value)
        if path.exists() and not path.is_file():
            continue
        for what, source in inputs.items():
            if source != "-" and path.exists() and Path(source).is_file() and path.samefile(source):
                fail(f"{flag} {value} is {what} {source}: writing there would replace it; write elsewhere")
        here = path.stat() if path.exists() else None
        key = (here.st_dev, here.st_ino) if here is not None else os.path.realpath(path)
        if key in seen:
            fail(f"{seen[key]} and {flag} both name {value}: each needs a file of its own")
        seen[key] = flag


def _session_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A blank ``--session`` would name one shared archive (or none, for clean): refuse it in one line."""
    if value is not None and not value.strip():
        fail(f"--session must name a session, not {value!r}")
    return value


class OneLineGroup(click.Group):
    """Click's own usage errors (an unknown option, a missing argument) as one line, status 2.

    Click would print the usage, a hint and the error on four lines; every
    other error of the command line is one ``toolbudget: error:`` line, and a
    script reading stderr should not have to tell them apart.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            with warnings.catch_warnings():
                said = warnings.showwarning
                warnings.showwarning = _one_line(said)
                warnings.simplefilter("default", ConfigWarning)
                status = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # no command at all: the help it asks for
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
            click.echo(f"toolbudget: error: {exc.format_message().rstrip('.')}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(status if isinstance(status, int) else 0)


def _one_line(said: Any) -> Any:
    """A ``showwarning`` that says a :class:`ConfigWarning` as one ``toolbudget: warning:`` line."""

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, ConfigWarning):
            click.echo(f"toolbudget: warning: {message}", err=True)
        else:
            said(message, category, *args, **kwargs)

    return show


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="toolbudget")
def main() -> None:
    """Keep an agent's tool-call history valid and inside its context budget.

    \b
    Settings, each source overriding the ones above it:
      defaults
      [tool.toolbudget] in pyproject.toml, then toolbudget.toml
      TOOLBUDGET_* environment variables (TOOLBUDGET_RESULT_MAX_CHARS...)
      flags (--result-max-chars, --turn-budget-chars, --compaction...)

    The files are searched from the working directory up to the top of the
    git checkout; the nearest directory holding either is used.

    \b
    Run 'toolbudget config' to see every value and where it came from.
    """


def policy_flags(func: F) -> F:
    """The common caps as flags; they win over the files and the environment."""
    options = [
        click.option(
            "--result-max-chars", type=int, help="Cap for one result of a tool with no cap of its own."
        ),
        click.option(
            "--turn-budget-chars", type=int, help="Cap for all results answering one assistant turn."
        ),
        click.option(
            "--compaction",
            type=click.Choice(COMPACTION_MODES),
            help="The compaction schedule (the policy's, cache-aware by default).",
        ),
        click.option(
            "--context-window-tokens",
            type=int,
            help="The model's context window (known per model name by default).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


FLAGS = ("result_max_chars", "turn_budget_chars", "compaction", "context_window_tokens")


def load_policy(given: dict[str, Any]) -> Sourced[Policy]:
    """The policy with the flags of :func:`policy_flags` taken out of ``given`` (a command's kwargs)."""
    return Policy.load_with_sources(flags={name: given.pop(name, None) for name in FLAGS})


@main.command()
@click.argument("source", default="-", metavar="[FILE|-]")
@click.option("--api", type=API_CHOICE, help="The body's wire API (told from its shape when left out).")
@friendly
def validate(source: str, api: str | None) -> None:
    """List the pairing violations in a request body.

    Exit 0 when it is valid, 1 when it is not.
    """
    inputs = read_bodies(read_input(source), _name(source))
    total = 0
    invalid = 0
    apis: list[str] = []
    for item in inputs:
        with _about(item, source):
            request = wire.parse(item.body, api)
        apis.append(request.api or "")
        violations = check_request(request)
        prefix = f"line {item.line}: " if item.line is not None else ""
        for violation in violations:
            click.echo(f"{prefix}{violation}")
        total += len(violations)
        invalid += bool(violations)
    names = ", ".join(dict.fromkeys(apis))
    of = f" in {invalid} of {len(inputs)} bodies" if len(inputs) > 1 else ""
    if total:
        click.echo(f"{total} violation(s){of} for {names}", err=True)
        sys.exit(1)
    click.echo(f"valid for {names}" + (f" ({len(inputs)} bodies)" if len(inputs) > 1 else ""), err=True)


@main.command()
@click.argument("source", default="-", metavar="[FILE|-]")
@click.option("--api", type=API_CHOICE, help="The body's wire API (told from its shape when left out).")
@_output_option("the repaired body")
@click.option("--report", callback=_output_path, help="Write what was repaired as JSON here.")
@click.option(
    "--close-pending", is_flag=True, help="Also close trailing calls that are still waiting to run."
)
@friendly
def repair(source: str, api: str | None, out: str | None, report: str | None, close_pending: bool) -> None:
    """Repair the pairing of a request body.

    A valid body is written back byte for byte.
    """
    _apart({"the input": source}, {"--output": out, "--report": report})
    inputs = read_bodies(read_input(source), _name(source))
    written: list[bytes] = []
    reports: list[dict[str, Any]] = []
    count = 0
    apis: list[str] = []
    for item in inputs:
        with _about(item, source):
            request = wire.parse(item.body, api)
        apis.append(request.api or "")
        before = check_request(request)
        fixed, repairs = repair_request(request, close_pending=close_pending)
        remaining = check_request(fixed) if repairs else []
        written.append(item.raw if fixed is request else rewritten(item, wire.render(fixed)))
        prefix = f"line {item.line}: " if item.line is not None else ""
        for done in repairs:
            click.echo(f"{prefix}repaired: {done}", err=True)
        for violation in remaining:
            click.echo(f"{prefix}cannot repair: {violation}", err=True)
        count += len(repairs)
        reports.append(
            {
                **({"line": item.line} if item.line is not None else {}),
                "api": request.api,
                "violations": [_violation(v) for v in before],
                "repairs": [
                    {"kind": r.kind, "index": r.index, "call_id": r.call_id, "detail": r.detail}
                    for r in repairs
                ],
                "remaining": [_violation(v) for v in remaining],
            }
        )
    _write_bodies(written, inputs, out)
    if report:
        Path(report).write_bytes(dumps(reports if _many(inputs) else reports[0], indent=True))
    click.echo(f"{count} repair(s) for {', '.join(dict.fromkeys(apis))}", err=True)


@main.command()
@click.argument("transcript")
@click.option("--to", "api", type=API_CHOICE, required=True, help="The wire API to write.")
@_output_option("the body")
@click.option("--conversation", "which", help="Which conversation of the file (its id or index).")
@click.option("--all", "every", is_flag=True, help="Write every conversation, one body per line.")
@click.option("--model", help="The model to name in the body (the transcript's own by default).")
@click.option(
    "--max-tokens",
    type=int,
    help="The output limit to set, in each API's own field (Anthropic requires one: 4096 by default).",
)
@progress_option
@friendly
def convert(
    transcript: str,
    api: str,
    out: str | None,
    which: str | None,
    every: bool,
    model: str | None,
    max_tokens: int | None,
    progress_mode: str,
) -> None:
    """Write the request body an agent at the end of TRANSCRIPT would send.

    With --all, one body per line (JSON Lines), which validate, repair and
    compact read back.
    """
    if max_tokens is not None and max_tokens <= 0:
        fail(f"--max-tokens must be a positive number of tokens, not {max_tokens}")
    if every and which is not None:
        fail("--all and --conversation choose differently; give one of them")
    _apart({"the transcript": transcript}, {"--output": out})
    loaded = _load(transcript)
    conversations = loaded.conversations
    if not conversations:
        fail(f"{transcript}: holds no conversation")
    if every:
        lines = []
        with Bar("convert", progress_mode) as bar:
            for done, c in enumerate(conversations, 1):
                lines.append(dumps(to_request(c, api, model=model, max_tokens=max_tokens)) + b"\n")
                bar.update(done, len(conversations))
        write_output(b"".join(lines), out)
        return
    chosen = _choose(conversations, which, transcript)
    write_output(dumps(to_request(chosen, api, model=model, max_tokens=max_tokens)), out)
    if len(conversations) > 1 and which is None:
        click.echo(
            f"{transcript} holds {len(conversations)} conversations; wrote {chosen.id!r} "
            "(choose with --conversation, or --all)",
            err=True,
        )


@main.command()
@click.argument("source", default="-", metavar="[FILE|-]")
@click.option("--api", type=API_CHOICE, help="The body's wire API (told from its shape when left out).")
@click.option(
    "--session", help="The session id (derived from the conversation when left out).", callback=_session_id
)
@click.option("--store", "store_url", help="Archive store URL: dir:PATH, sqlite:PATH, redis://..., memory:.")
@_output_option("the managed body")
@click.option("--report", callback=_output_path, help="Write what was done as JSON here.")
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 when a managed body is still over its context window or a turn over its budget.",
)
@policy_flags
@progress_option
@friendly
def compact(
    source: str,
    api: str | None,
    session: str | None,
    store_url: str | None,
    out: str | None,
    report: str | None,
    strict: bool,
    progress_mode: str,
    **flags: Any,
) -> None:
    """Repair a request body and cut its oversized tool results, keeping every original recallable.

    The workspace is kept after the command ends, so the cuts can be recalled;
    remove it with `toolbudget clean`. A body still over its context window
    after the cuts is written all the same, with a warning and "over_window":
    true in --report; --strict makes that, or a turn over its budget, exit 1.
    """
    if store_url is not None and store_url.strip().lower().startswith("memory:"):
        fail(
            "--store memory: ends with this command, so the keys in the markers it writes could never "
            "be recalled; use dir:PATH (the default workspace) or sqlite:PATH, or redis://HOST:PORT/DB"
        )
    _apart({"the input": source}, {"--output": out, "--report": report})
    inputs = read_bodies(read_input(source), _name(source))
    policy = load_policy(flags).policy
    _store_answers(store_url if store_url is not None else policy.store)
    written: list[bytes] = []
    reports: list[dict[str, Any]] = []
    said: list[tuple[list[logging.LogRecord], Any, str]] = []
    short = False
    with _logs_held() as logs, Bar("compact", progress_mode) as bar:
        for done, item in enumerate(inputs, 1):
            # One session per body: each conversation has its own archive (the same one with --session).
            with Session(session, store=store_url, policy=policy) as live, _about(item, source):
                managed = live.manage(item.body if item.exact else item.raw, api)
            body = managed.body
            written.append(body if isinstance(body, bytes) else dump(body))
            r = managed.report
            reports.append({**({"line": item.line} if item.line is not None else {}), **r.as_dict()})
            said.append((logs[:], r, f"line {item.line}: " if item.line is not None else ""))
            logs.clear()
            short = short or r.over_window or bool(r.budget_unreachable)
            bar.update(done, len(inputs))
    _store_kept_something([r for _, r, _ in said], [record for held, _, _ in said for record in held])
    for held, r, prefix in said:
        for record in held:
            logging.getLogger(record.name).handle(record)
        _compact_summary(r, prefix)
    _write_bodies(written, inputs, out)
    if report:
        Path(report).write_bytes(dumps(reports if _many(inputs) else reports[0], indent=True))
    if strict and short:
        sys.exit(1)


def _store_answers(url: str | None) -> None:
    """Refuse a store that is down before anything is cut (exit 2).

    A session meeting a store that fails carries on, its cuts marked "could
    not be kept": an agent's next request must not fail for it. A command
    asked to archive into a store that does not answer at all would write a
    body whose every cut promises nothing; better to say so and write nothing.
    """
    try:
        store = open_store(url)
    except InputError as exc:
        fail(str(exc))
    try:
        store.missing(_PROBE_SESSION, [_PROBE_KEY])
    except StoreError as exc:
        fail(f"the store does not answer, so no cut could be recalled: {exc}")
    finally:
        store.close()


def _store_kept_something(reports: list[Any], logs: list[logging.LogRecord]) -> None:
    """Refuse a run whose store kept none of its cuts (exit 2, nothing written).

    A store can answer the probe and still keep nothing: a read-only
    directory, a full disk. The body would then be written with every cut
    saying it cannot be recalled, and the originals nowhere. A store that fails
    for some cuts only costs those, as in a session.
    """
    lost = sum(r.store_fallbacks for r in reports)
    if not lost or lost < sum(r.results_cut for r in reports):
        return
    why = next((record.getMessage() for record in logs if record.levelno >= logging.WARNING), "")
    why = why.removeprefix("toolbudget: ")
    fail(
        "the store could not keep any cut, so none could be recalled; nothing written"
        + (f": {why}" if why else "")
    )


class _Held(logging.Handler):
    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__()
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


@contextmanager
def _logs_held() -> Iterator[list[logging.LogRecord]]:
    """Hold the library's log lines back until a command knows it will write its output."""
    logger = logging.getLogger("toolbudget")
    held: list[logging.LogRecord] = []
    handler = _Held(held)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield held
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


_PROBE_SESSION = "toolbudget-probe"
_PROBE_KEY = "0" * 32


def _compact_summary(r: Any, prefix: str) -> None:
    click.echo(
        f"{prefix}session {r.session}: {r.results_cut} of {r.results_seen} results cut, "
        f"{r.chars_before:,} -> {r.chars_after:,} chars "
        f"(~{r.tokens_before:,} -> ~{r.tokens_after:,} tokens), "
        f"{len(r.repairs)} repair(s)",
        err=True,
    )
    if r.store_fallbacks:
        click.echo(
            f"{prefix}warning: the store failed for {r.store_fallbacks} result(s); "
            "those cuts cannot be recalled",
            err=True,
        )
    for turn in r.budget_unreachable:
        click.echo(
            f"{prefix}warning: the results of turn {turn.turn} need {turn.chars:,} chars, "
            f"over the {turn.budget:,} budget",
            err=True,
        )
    if r.over_window:
        click.echo(
            f"{prefix}warning: the request is still ~{r.tokens_after:,} tokens, "
            f"{r.tokens_after / max(r.window_tokens, 1):.1f}x the {r.window_tokens:,}-token context window; "
            "the provider will likely refuse it",
            err=True,
        )


def _many(inputs: list[Input]) -> bool:
    return bool(inputs) and inputs[0].line is not None


def _write_bodies(written: list[bytes], inputs: list[Input], out: str | None) -> None:
    """One body as it is; JSON Lines in, JSON Lines out (every line ending in a newline)."""
    if _many(inputs):
        write_output(b"".join(line + b"\n" for line in written), out)
    else:
        write_output(written[0], out)


def _must_exist(url: str | None) -> None:
    """Stop a command that only reads a store the URL names but nobody ever wrote: opening it
    would make it, empty, where a typo put it."""
    where = store_path(url)
    if where is not None and not where.exists():
        fail(f"no archive store at {where} (nothing was ever kept there; check --store)")


@main.command()
@click.argument("key")
@click.option("--session", required=True, help="The session the key belongs to.", callback=_session_id)
@click.option("--store", "store_url", help="Archive store URL (the session workspace by default).")
@click.option("--lines", help='A line range "A:B" (1-based, inclusive).')
@click.option("--grep", "pattern", help="Only the lines matching this regular expression.")
@click.option("--max-chars", type=int, default=None, help="Page size for --lines and --grep.")
@friendly
def recall(
    key: str,
    session: str,
    store_url: str | None,
    lines: str | None,
    pattern: str | None,
    max_chars: int | None,
) -> None:
    """Print what a cut left out: with no option, the exact original."""
    policy = Policy.load()
    _must_exist(store_url or policy.store)
    with Session(session, store=store_url, policy=policy) as live:
        try:
            if lines is None and pattern is None:
                emit(live.original(key_of(key)).encode("utf-8", "surrogatepass"))
                return
            query = parse_query({"key": key, "lines": lines, "grep": pattern})
            click.echo(live.recall(query.key, lines=query.lines, grep=query.grep, max_chars=max_chars))
        except NotFoundError as exc:
            click.echo(f"toolbudget: {exc}", err=True)
            sys.exit(1)


@main.command()
@click.option(
    "--session",
    help="The session whose archive to remove (without it: every expired archive).",
    callback=_session_id,
)
@click.option("--store", "store_url", help="Archive store URL (the session workspace by default).")
@friendly
def clean(session: str | None, store_url: str | None) -> None:
    """Remove a session's archive, or, without --session, every archive past its TTL.

    An archive a live session still holds is never removed.
    """
    url = store_url or Policy.load().store
    if session is not None:
        _must_exist(url)  # a sweep of a store that is not there finds nothing; a named session is a mistake
    store = open_store(url)
    try:
        if session is None:
            if not isinstance(store, DirStore):
                click.echo(f"{store.url} expires its entries by itself (TTL); nothing to sweep", err=True)
                return
            removed = store.swept + store.sweep()
            click.echo(f"removed {len(removed)} expired archive(s) from {store.root}", err=True)
            return
        count = len(store.keys(session))
        store.drop(session)
    finally:
        store.close()
    click.echo(
        f"removed {count} archive entries of session {session} (originals and their records)", err=True
    )


@main.command()
@click.argument("transcript")
@click.option(
    "--api", type=API_CHOICE, default="anthropic", show_default=True, help="The wire API to replay as."
)
@click.option(
    "--session", help="The session id (derived from the conversation when left out).", callback=_session_id
)
@click.option("--store", "store_url", help="Archive store URL (memory: by default for a replay).")
@click.option(
    "--emit",
    "emit_dir",
    type=click.Path(file_okay=False),
    help="Write each body to DIR/MODE/NNNN.json (MODE: the schedule, eager, unmanaged).",
)
@click.option("--report", callback=_output_path, help="Write per-turn numbers and totals as JSON here.")
@click.option("--conversation", "which", help="Which conversation of the file (its id or index).")
@click.option(
    "--all", "every", is_flag=True, help="Replay every conversation of the file, one after another."
)
@click.option(
    "--price",
    "price_spec",
    metavar="MODEL|FILE",
    help="Bill (and schedule) as anthropic-5m, anthropic-1h, openai, gemini, none, or a JSON file "
    '{"write": W, "read": R, "ttl": SECONDS} (default: the API\'s own).',
)
@click.option(
    "--idle",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Requests arrive 10 s apart, with a gap of SECONDS before every --idle-every-th one.",
)
@click.option(
    "--timestamps",
    "own_clock",
    is_flag=True,
    help="Requests arrive when the transcript says they were sent (Claude Code, Codex and Gemini CLI files).",
)
@click.option(
    "--idle-every",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="With --idle: how many requests apart the gaps are.",
)
@policy_flags
@progress_option
@friendly
def replay(
    transcript: str,
    api: str,
    session: str | None,
    store_url: str | None,
    emit_dir: str | None,
    report: str | None,
    which: str | None,
    every: bool,
    price_spec: str | None,
    idle: float | None,
    idle_every: int,
    own_clock: bool,
    progress_mode: str,
    **flags: Any,
) -> None:
    """Walk a real transcript turn by turn, managing each request, and tally prefix caching.

    Billed-equivalent input tokens are shown for the chosen schedule, eager
    and the unmanaged history under one price model (--price). With --emit,
    each mode's bodies go to DIR/MODE/NNNN.json. With --all, each
    conversation gets its own table (and its own subdirectory of --emit, by
    index); --report then holds a list.
    """
    from dataclasses import replace

    from .prices import load_price
    from .replay import arrivals_for, replay_session, request_count, transcript_arrivals

    if every and which is not None:
        fail("--all and --conversation choose differently; give one of them")
    if idle is not None and not math.isfinite(idle):
        fail(f"--idle must be a finite number of seconds, not {idle}")
    given = click.get_current_context().get_parameter_source("idle_every")
    if idle is None and given not in (None, click.core.ParameterSource.DEFAULT):
        fail("--idle-every spaces the gaps of --idle; give --idle SECONDS with it")
    _apart({"the transcript": transcript}, {"--report": report})
    if emit_dir is not None:
        earlier = next(Path(emit_dir).glob("**/[0-9][0-9][0-9][0-9].json"), None)
        if earlier is not None:
            fail(
                f"--emit {emit_dir} already holds bodies ({earlier}): give a new or empty directory, "
                "so no body of another replay is billed with these"
            )
    loaded = _load(transcript)
    conversations = loaded.conversations
    if not conversations:
        fail(f"{transcript}: holds no conversation")
    if every:
        chosen = list(enumerate(conversations))
    else:
        one = _choose(conversations, which, transcript)
        chosen = [next((i, c) for i, c in enumerate(conversations) if c is one)]
        if len(conversations) > 1 and which is None:
            click.echo(
                f"{transcript} holds {len(conversations)} conversations; replaying {one.id!r} "
                "(choose with --conversation, or --all)",
                err=True,
            )
    policy = load_policy(flags).policy
    if own_clock and idle is not None:
        fail("--timestamps and --idle give the requests different times; give one of them")
    if price_spec is not None:
        load_price(price_spec)  # an unknown name or a bad file is one line, exit 2
        policy = replace(policy, cache_price=price_spec)
    outcomes = []
    bar = Bar("replay", progress_mode)
    for index, conversation in chosen:
        sink = Path(emit_dir) if emit_dir else None
        if sink is not None and every:
            sink = sink / f"{index:03d}"
        label = f"replay {index + 1}/{len(conversations)}" if every else "replay"
        arrivals = arrivals_for(request_count(conversation), idle, idle_every)
        if arrivals and not math.isfinite(arrivals[-1]):
            fail(f"--idle {idle:g}: the requests' arrival times would pass what a clock can hold")
        if own_clock:
            arrivals = transcript_arrivals(Path(transcript), conversation)
            if arrivals is None:
                fail(f"{transcript}: its turns carry no timestamps toolbudget can line up with its requests")
        with bar:
            outcome = replay_session(
                conversation,
                api,
                policy,
                session=session,
                store=store_url or "memory:",
                emit=sink,
                progress=partial(_tell, bar, label),
                arrivals=arrivals,
            )
        if every:
            click.echo(f"conversation {index}: {conversation.id}")
        click.echo(outcome.table(), nl=False)
        if every and index != chosen[-1][0]:
            click.echo("")
        outcomes.append(outcome.as_dict())
    if report:
        Path(report).write_bytes(dumps(outcomes if every else outcomes[0], indent=True))


@main.command("mcp")
@click.option("--store", "store_url", help="Archive store URL (the policy's store by default).")
@click.option("--session", callback=_session_id, help="Answer only from this session's archive.")
@click.option("--tenant", help="Answer only from this proxy tenant's sessions (16 hex digits).")
@click.option(
    "--transport", type=click.Choice(["stdio", "streamable-http"]), default="stdio", show_default=True
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address for streamable HTTP.")
@click.option("--port", type=click.IntRange(1, 65535), default=8788, show_default=True)
@friendly
def mcp_command(
    store_url: str | None, session: str | None, tenant: str | None, transport: str, host: str, port: int
) -> None:
    """Serve the recall tool over MCP, from the store the library and the proxy write to."""
    from .mcpserver import RecallServer, build_server

    if tenant is not None and not re.fullmatch(r"[0-9a-f]{16}", tenant):
        fail(f"--tenant is the 16 hex digits of a proxy tenant, not {tenant!r:.80}")
    try:
        import mcp  # noqa: F401
    except ImportError:
        fail("toolbudget mcp needs the mcp package: pip install 'toolbudget[mcp]'")
    policy = Policy.load()
    if transport == "streamable-http":
        from .proxy.listen import check_listen

        check_listen(host, port, reuse_port=False)
    with open_store(store_url or policy.store) as store:
        server = build_server(RecallServer(store, policy=policy, session=session, tenant=tenant))
        if transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=host, port=port)


@main.command("config")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@policy_flags
@friendly
def config_command(as_json: bool, **flags: Any) -> None:
    """Show every setting's effective value and where it came from.

    A source is one of: default, pyproject (its [tool.toolbudget] table),
    toolbudget.toml, environment (a TOOLBUDGET_* variable) or flag. Give the
    same flags as compact or replay to see what they would run with.
    """
    loaded = load_policy(flags)
    rows = []
    for doc in setting_docs(Policy):
        source = loaded.sources[doc.name]
        rows.append(
            {
                "setting": doc.name,
                "value": _json_value(getattr(loaded.policy, doc.name)),
                "source": source.kind,
                "where": source.where or None,
                "environment": doc.env,
                "default": doc.default,
                "meaning": doc.meaning,
            }
        )
    if as_json:
        emit(dumps({"files": [str(path) for path in loaded.files], "settings": rows}, indent=True) + b"\n")
        return
    from rich.table import Table

    table = Table(title="toolbudget settings")
    for column in ("setting", "value", "source", "where"):
        table.add_column(column, overflow="fold")
    for row, doc in zip(rows, setting_docs(Policy), strict=True):
        shown = show_value(getattr(loaded.policy, doc.name))
        table.add_row(
            row["setting"], doc.default if shown == "-" else shown, row["source"], row["where"] or ""
        )
    console = _stdout_console()
    console.print(table)
    files = (
        ", ".join(str(path) for path in loaded.files) or "none (searched up to the top of the git checkout)"
    )
    console.print(f"settings files: {files}", highlight=False, soft_wrap=True)


def _json_value(value: Any) -> Any:
    """A setting's value as JSON holds it: caps as an object, tool sets as a sorted list."""
    if isinstance(value, Mapping):
        return dict(sorted(value.items()))
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return value


@main.command()
@click.option("--dir", "directory", default="example", show_default=True, help="Where to write the example.")
@click.option("--own/--no-own", default=True, help="Also process your newest own agent session, if any.")
@friendly
def demo(directory: str, own: bool) -> None:
    """Record a small real session here, convert it to every API, validate and repair it."""
    from .demo import run_demo

    run_demo(Path(directory), include_own=own)


@main.command("inspect")
@click.argument("source", metavar="TRANSCRIPT|BODY")
@click.option(
    "--api",
    type=API_CHOICE,
    help="The API to build a transcript's requests for (anthropic by default); for a body, a hint.",
)
@click.option("--conversation", "which", help="Which conversation of the file (its id or index).")
@click.option("--html", "html_out", callback=_output_path, help="Write an interactive HTML report.")
@click.option("--png", "png_out", callback=_output_path, help="Write the report's charts as a PNG.")
@progress_option
@friendly
def inspect_command(
    source: str,
    api: str | None,
    which: str | None,
    html_out: str | None,
    png_out: str | None,
    progress_mode: str,
) -> None:
    """Where a session's context budget goes: per request, by band, by schedule.

    Reads a transcript (any format replay reads) or one request body of any
    API, and shows each request's tokens split by role and tool, the largest
    results and their kinds, and what each compaction schedule would send and
    bill. --html and --png need the report extra: pip install 'toolbudget[report]'.
    """
    from .inspection import inspect_source
    from .inspection_view import render

    _apart({"the input": source}, {"--html": html_out, "--png": png_out})
    if html_out or png_out:
        from .inspection_charts import require

        require()  # before the work, so a missing extra costs nothing
    with Bar("inspect", progress_mode) as bar:
        session, inspection = inspect_source(source, api=api, conversation=which, progress=bar.update)
    for note in session.notes:
        click.echo(f"toolbudget: warning: {note}", err=True)
    render(inspection, _stdout_console())
    if html_out or png_out:
        from .inspection_charts import html_report, png_report

        if html_out:
            Path(html_out).write_text(html_report(inspection), encoding="utf-8")
            click.echo(f"wrote {html_out}", err=True)
        if png_out:
            Path(png_out).write_bytes(png_report(inspection))
            click.echo(f"wrote {png_out}", err=True)


def _tell(bar: Bar, label: str, done: int, total: int) -> None:
    bar.update(done, total, label)


def _choose(conversations: Any, which: str | None, transcript: str) -> Any:
    if which is None:
        main_ones = [c for c in conversations if not c.sidechain]
        return (main_ones or conversations)[0]
    for conversation in conversations:
        if conversation.id == which:
            return conversation
    if which.isdigit() and int(which) < len(conversations):
        return conversations[int(which)]
    raise InputError(f"{transcript}: no conversation {which!r} (it has {len(conversations)})")


def _violation(v: Any) -> dict[str, Any]:
    return {
        "rule": v.rule,
        "location": v.location,
        "message": v.message,
        "index": v.index,
        "call_id": v.call_id,
    }


@contextmanager
def _about(item: Input, source: str) -> Iterator[None]:
    """An input error raised for ``item`` names the file (and line) it came from.

    The library names a body only as "body": on the command line the reader
    needs the file the body is in, for each command alike.
    """
    try:
        yield
    except InputError as exc:
        where = item.where(_name(source))
        if str(exc).startswith(where):
            raise
        raise type(exc)(str(exc), location=where) from None


def _name(source: str) -> str:
    return "standard input" if source == "-" else source


# --- the proxy -------------------------------------------------------------------------------
# Its server's packages (the proxy extra) are imported only when it starts, so ``setup`` works
# without them and a missing extra is one line saying how to install it.


@main.group(invoke_without_command=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8787, show_default=True, type=click.IntRange(0, 65535), help="Port.")
@click.option("--upstream", help="Every API's upstream at once (e.g. a llama.cpp server).")
@click.option("--anthropic-upstream", help="The Anthropic Messages upstream.")
@click.option("--openai-upstream", help="The OpenAI Chat and Responses upstream.")
@click.option("--gemini-upstream", help="The Gemini upstream.")
@click.option("--store", "store_url", help="Archive store URL (dir: by default: paths the agent can read).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="A toolbudget.toml to use.")
@click.option("--report-headers", is_flag=True, help="Add x-toolbudget-* headers to answers.")
@click.option(
    "--workers", default=1, show_default=True, type=click.IntRange(1, 256), help="Processes sharing the port."
)
@click.pass_context
def proxy(
    ctx: click.Context,
    host: str,
    port: int,
    upstream: str | None,
    anthropic_upstream: str | None,
    openai_upstream: str | None,
    gemini_upstream: str | None,
    store_url: str | None,
    config_file: str | None,
    report_headers: bool,
    workers: int,
) -> None:
    """Serve a transparent proxy that manages every agent request sent to it.

    \b
    Point an agent at it with the lines 'toolbudget proxy setup AGENT' prints.
    Credentials go upstream untouched and are never logged or stored.
    """
    ctx.obj = {"base": _origin(host, port)}
    if ctx.invoked_subcommand is not None:
        return
    from .proxy.config import ProxyConfig, policy_from_file, upstreams_of

    absent = [name for name in ("aiohttp", "prometheus_client") if importlib.util.find_spec(name) is None]
    if absent:
        fail(f"the proxy needs {' and '.join(absent)}: pip install 'toolbudget[proxy]'")
    try:
        config = ProxyConfig(
            upstreams=upstreams_of(
                upstream, anthropic=anthropic_upstream, openai=openai_upstream, gemini=gemini_upstream
            ),
            store=store_url,
            policy=policy_from_file(config_file),
            report_headers=report_headers,
        )
    except ToolbudgetError as exc:
        fail(str(exc))
    from .proxy.server import preflight, serve

    try:
        preflight(config, host, port, workers)
    except ToolbudgetError as exc:
        fail(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    base = ctx.obj["base"]
    try:
        status = serve(
            config, host, port, workers, announce=lambda: click.echo(f"toolbudget proxy on {base}", err=True)
        )
    except ToolbudgetError as exc:
        fail(str(exc))
    except OSError as exc:  # the address taken between the check and the server
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    ctx.exit(status)


def _origin(host: str, port: int) -> str:
    """The URL a client dials: an IPv6 address goes in brackets, or its colons read as the port's."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@proxy.command()
@click.argument("agent", type=click.Choice(PROXY_AGENTS))
@click.pass_context
def setup(ctx: click.Context, agent: str) -> None:
    """Print the lines that point AGENT at this proxy (the --host and --port before 'setup')."""
    click.echo(setup_lines(agent, ctx.obj["base"]), nl=False)


if __name__ == "__main__":  # pragma: no cover
    main()
