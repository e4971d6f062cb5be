"""The callback module ``litellm_proxy_config.yaml`` names: toolbudget on every routed request.

``ToolbudgetLogger()`` keeps a pool of sessions on the policy's store
(``TOOLBUDGET_STORE``), one per conversation: the ``x-toolbudget-session``
header, Claude Code's session header, the body's ``prompt_cache_key``, or the
conversation's hash.
"""

from toolbudget.adapters.litellm import ToolbudgetLogger

handler = ToolbudgetLogger()
