#!/usr/bin/env bash
# Set up everything from nothing and run every check: format, lint, types, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# The store tests run against a real Redis server. Install it when we can (root with apt);
# elsewhere those tests skip and say so (and fail instead under CI, where it must be present).
if ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    else
        echo "note: redis-server is not installed; the Redis store tests will skip" >&2
    fi
fi
. scripts/setup.sh
ruff format --check .
ruff check .
mypy
pytest "$@"
