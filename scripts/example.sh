#!/usr/bin/env bash
# Set up a virtual environment from nothing and run the main job on a real example:
# record a real agent session on this repository, convert it to every wire API, validate and repair it.
# It installs only what the demo needs (the package and its cli extra); scripts/test.sh installs the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[cli]'
toolbudget demo --dir example "$@"
