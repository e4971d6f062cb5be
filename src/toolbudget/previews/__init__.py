"""Structure-aware previews of over-long tool results.

When a tool result is over its cap, the model sees a preview: excerpts chosen
for the kind of content, plus exactly one marker line (written by the
caller's :data:`MarkerFn`) saying what was cut and how to recall it.

- :func:`detect` labels the content (``json``, ``diff``, ``pytest``, ``file-view``…)
  from a bounded sample.
- :func:`make_preview` previews it with the strategy of its kind: valid JSON
  for JSON, header and whole rows for tables, whole hunks for diffs, errors,
  stack traces and the summary for logs, head and tail for everything else.

Guarantees: a text within ``limit`` comes back unchanged; otherwise the marker
appears once and the preview fits ``limit`` (see :func:`make_preview` for the
precise bound); excerpts are verbatim slices cut at line boundaries (or at
character boundaries in a line too long to keep); the result depends only on
the arguments.

Compaction, in-place shortening and recovery cut texts the same way, so the
line-boundary cuts (:func:`head_end`, :func:`tail_start`, :func:`newline_of`),
the envelope a harness wraps around output (:func:`split_envelope`) and the
pattern of a preview's gap line (:data:`SEPARATOR_RE`) are offered here too.
"""

from __future__ import annotations

from ._base import SEPARATOR_RE, MarkerFn, Preview
from ._envelope import split_envelope
from ._lines import head_end, newline_of, tail_start
from ._make import make_preview
from .detect import KINDS, STRATEGY, detect

__all__ = [
    "KINDS",
    "SEPARATOR_RE",
    "STRATEGY",
    "MarkerFn",
    "Preview",
    "detect",
    "head_end",
    "make_preview",
    "newline_of",
    "split_envelope",
    "tail_start",
]
