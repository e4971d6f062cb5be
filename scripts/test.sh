#!/usr/bin/env bash
# Set up everything from nothing and run every check: format, lint, types, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# The store tests run against a real Redis server, and the HTML report of `toolbudget inspect`
# is opened in a real headless Chromium. Install them when we can (root with apt); elsewhere
# those tests skip and say so (and fail instead under CI, where both must be present). npm installs
# the real Claude Code and Codex the client tests run (scripts/setup.sh).
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "note: ${missing[*]} not installed; the tests that need them will skip" >&2
    fi
fi
. scripts/setup.sh
# With npm here the real clients were installed: a client test that cannot run them fails.
if command -v npm >/dev/null 2>&1; then
    export REALCLIENTS_REQUIRED=1
fi
ruff format --check .
ruff check .
mypy
pytest "$@"
