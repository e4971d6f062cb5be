#!/usr/bin/env bash
# Set up a virtual environment from nothing and run every check: format, lint, types, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
ruff format --check .
ruff check .
mypy
pytest "$@"
