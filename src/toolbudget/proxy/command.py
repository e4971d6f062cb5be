"""``toolbudget proxy``: serve the proxy, or print the lines that point an agent at it.

Only ``click`` is imported here; the server's packages (the ``proxy`` extra)
are imported when the server starts, so ``setup`` works without them and a
missing extra is one line saying how to install it.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import tomllib
from pathlib import Path
from typing import Any

import click

from ..errors import InputError, ToolbudgetError
from ..policy import Policy
from .config import ProxyConfig, upstreams_of
from .setup import AGENTS, setup_lines

__all__ = ["PROXY_PACKAGES", "proxy"]

PROXY_PACKAGES = ("aiohttp", "prometheus_client")


class _Failure(click.ClickException):
    """One line on stderr and exit status 2, as every other command's unusable input."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"toolbudget: error: {self.format_message()}", err=True)


def _policy(config: str | None) -> Policy:
    if config is None:
        return Policy.load()
    path = Path(config)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"--config {config}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"--config {config}: not TOML: {exc}") from None
    table: Any = data.get("tool", {}).get("toolbudget", data) if path.name == "pyproject.toml" else data
    table = table.get("toolbudget", table) if isinstance(table, dict) else table
    if not isinstance(table, dict):
        raise InputError(f"--config {config}: the settings must be a table")
    return Policy.load(**table)


@click.group(invoke_without_command=True)
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
    ctx.obj = {"base": f"http://{host}:{port}"}
    if ctx.invoked_subcommand is not None:
        return
    absent = [name for name in PROXY_PACKAGES if importlib.util.find_spec(name) is None]
    if absent:
        raise _Failure(f"the proxy needs {' and '.join(absent)}: pip install 'toolbudget[proxy]'")
    try:
        config = ProxyConfig(
            upstreams=upstreams_of(
                upstream, anthropic=anthropic_upstream, openai=openai_upstream, gemini=gemini_upstream
            ),
            store=store_url,
            policy=_policy(config_file),
            report_headers=report_headers,
        )
    except ToolbudgetError as exc:
        raise _Failure(str(exc)) from None
    from .server import serve

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    click.echo(f"toolbudget proxy on http://{host}:{port}", err=True)
    serve(config, host, port, workers)


@proxy.command()
@click.argument("agent", type=click.Choice(AGENTS))
@click.pass_context
def setup(ctx: click.Context, agent: str) -> None:
    """Print the lines that point AGENT at this proxy (the --host and --port before 'setup')."""
    click.echo(setup_lines(agent, ctx.obj["base"]), nl=False)
