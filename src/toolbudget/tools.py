"""Which tool does what: the tool names agents use, by role.

Caps, compaction summaries and content detection all decide by what a tool
is, and agents name the same tool differently (Claude Code's ``Read`` is
Gemini CLI's ``read_file``, OpenHands' ``str_replace_editor`` and SWE-agent's
``open``). The names come from Claude Code, Codex, Gemini CLI, OpenHands,
SWE-agent, mini-swe-agent and the tau benchmarks, as their transcripts call
them. The recall tool is :data:`toolbudget.marker.RECALL_TOOL` (see
:func:`toolbudget.marker.is_recall_tool`).

Two of the sets are about reading files and differ on purpose:
:data:`FILE_READ_TOOLS` is every tool whose result is file contents (they get
a larger cap, since a cut file costs a re-read), and :data:`FILE_VIEW_TOOLS`
the tools whose result is *one* file's text, shown at the path their key
argument names (the path's extension then tells what the content is). A
result of ``read_many_files`` is many files; one of ``NotebookRead`` is cells.
"""

from __future__ import annotations

__all__ = [
    "EDITOR_TOOLS",
    "EXEC_TOOLS",
    "FILE_READ_TOOLS",
    "FILE_VIEW_TOOLS",
    "LISTING_TOOLS",
    "REPORT_TOOLS",
    "SEARCH_TOOLS",
    "WRITE_TOOLS",
]

FILE_READ_TOOLS = (
    "Read",
    "read_file",
    "ReadFile",
    "read_many_files",
    "view_file",
    "open",
    "NotebookRead",
    "fs_read",
    "cat",
)
"""Tools whose result is the contents of files."""

SEARCH_TOOLS = (
    "Grep",
    "grep",
    "search_dir",
    "search_file",
    "search_file_content",
    "rg",
    "ripgrep",
    "codebase_search",
    "find_in_files",
    "WebSearch",
    "web_search",
)
"""Tools whose result is search hits, in files or on the web."""

LISTING_TOOLS = (
    "Glob",
    "glob",
    "LS",
    "ls",
    "list_directory",
    "list_dir",
    "list_files",
    "find_file",
    "tree",
)
"""Tools whose result lists files."""

FILE_VIEW_TOOLS = frozenset({"Read", "read_file", "read", "view", "open", "cat", "view_file"})
"""Tools that show one file, whose key argument is its path."""

EXEC_TOOLS = frozenset(
    {
        "Bash",
        "bash",
        "shell",
        "run_shell_command",
        "exec_command",
        "execute_bash",
        "local_shell",
        "python",
        "run",
        "run_command",
        "terminal",
        "BashOutput",
        "write_stdin",
    }
)
"""Shells and interpreters: their results carry an exit status and error text worth keeping."""

WRITE_TOOLS = frozenset(
    {
        "Write",
        "Edit",
        "MultiEdit",
        "NotebookEdit",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "apply_patch",
        "write_file",
        "replace",
        "edit_file",
        "edit",
        "create",
    }
)
"""Tools that change files: their result is a confirmation or a view of the edited file."""

EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
"""Editors with a ``command`` verb, whose ``view`` shows the file at ``path``."""

REPORT_TOOLS = frozenset({"Task", "Agent"})
"""Tools whose result is a sub-agent's report."""
