"""``python -m toolbudget``: the command line, for an environment whose scripts are not on ``PATH``."""

from .cli import main

main(prog_name="toolbudget")
