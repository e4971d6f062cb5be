"""``python -m toolbudget``: the command line, for an environment whose scripts are not on ``PATH``."""

from .cli_entry import main

main(prog_name="toolbudget")
