#!/usr/bin/env bash
# Set up a virtual environment from nothing and run the main job on a real example:
# record a real agent session on this repository, convert it to every wire API, validate and repair it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
toolbudget demo --dir example "$@"
