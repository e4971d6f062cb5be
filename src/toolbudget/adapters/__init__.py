"""toolbudget inside agent frameworks: one thin module per framework, each behind its own extra.

Every adapter does the same three things with the framework's own hooks, and
holds no policy of its own:

- it cuts each fresh tool result where the framework hands it over
  (:meth:`Session.cut_result <toolbudget.Session.cut_result>`), so the
  framework's own history stores the preview, never the whole text;
- it manages each model request (:class:`~toolbudget.ManagedCall`): the
  framework's messages become a wire body, the core repairs, budgets,
  compacts and recovers from overflow, and the body it sends comes back as
  the framework's messages, untouched ones as the caller's own objects;
- it registers the recall tool, answered by
  :meth:`Session.handle_recall <toolbudget.Session.handle_recall>`.

Modules: :mod:`.langchain` (LangChain 1.x and deepagents), :mod:`.pydantic_ai`,
:mod:`.openai_agents`, :mod:`.litellm`. Importing this package imports no
framework; each module needs its own extra.
"""

from __future__ import annotations

__all__: list[str] = []
