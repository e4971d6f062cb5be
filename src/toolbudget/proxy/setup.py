"""The exact lines that point each agent at the proxy, as ``toolbudget proxy setup AGENT`` prints them.

Each agent reads its endpoint from its own place (integrations differ in
whether the URL holds ``/v1``): Claude Code and the Anthropic SDKs take the
origin, the OpenAI SDKs and Codex take ``.../v1``, Gemini's SDK the origin.
The agents that take tools from MCP servers also get the registration of
``toolbudget mcp``, so the model can recall a cut through the recall tool
wherever the proxy's paths are not files it can read.
"""

from __future__ import annotations

__all__ = ["AGENTS", "setup_lines"]

AGENTS = ("claude", "codex", "gemini", "aider", "openhands", "opencode", "env")

_MCP_JSON = '{"mcpServers": {"toolbudget": {"type": "stdio", "command": "toolbudget", "args": ["mcp"]}}}'


def setup_lines(agent: str, base: str) -> str:
    """What to run or write for ``agent`` to reach a proxy at ``base`` (``http://HOST:PORT``)."""
    v1 = f"{base}/v1"
    if agent == "claude":
        return (
            f"export ANTHROPIC_BASE_URL={base}\n"
            "# the recall tool (pip install 'toolbudget[mcp]'), or the same in .mcp.json:\n"
            "claude mcp add toolbudget -- toolbudget mcp\n"
            f"# {_MCP_JSON}\n"
        )
    if agent == "codex":
        return (
            "# in ~/.codex/config.toml\n"
            'model_provider = "toolbudget"\n'
            "\n"
            "[model_providers.toolbudget]\n"
            'name = "toolbudget"\n'
            f'base_url = "{v1}"\n'
            'env_key = "OPENAI_API_KEY"\n'
            'wire_api = "responses"\n'
            "supports_websockets = false\n"
            "\n"
            "# the recall tool (pip install 'toolbudget[mcp]')\n"
            "[mcp_servers.toolbudget]\n"
            'command = "toolbudget"\n'
            'args = ["mcp"]\n'
        )
    if agent == "gemini":
        return (
            f"export GOOGLE_GEMINI_BASE_URL={base}\n"
            "# the recall tool (pip install 'toolbudget[mcp]'), or mcpServers in .gemini/settings.json:\n"
            "gemini mcp add toolbudget toolbudget mcp\n"
            f"# {_MCP_JSON}\n"
        )
    if agent == "aider":
        return f"export OPENAI_API_BASE={v1}\nexport ANTHROPIC_BASE_URL={base}\n"
    if agent == "openhands":
        return (
            "# in config.toml (or: export LLM_BASE_URL=...); OpenAI-compatible models take /v1,\n"
            f"# Anthropic models the bare {base}\n"
            "[llm]\n"
            f'base_url = "{v1}"\n'
        )
    if agent == "opencode":
        return (
            "export OPENCODE_CONFIG_CONTENT='"
            f'{{"provider": {{"anthropic": {{"options": {{"baseURL": "{v1}"}}}}, '
            f'"openai": {{"options": {{"baseURL": "{v1}"}}}}}}}}'
            "'\n"
        )
    if agent == "env":
        return (
            f"export ANTHROPIC_BASE_URL={base}\n"
            f"export OPENAI_BASE_URL={v1}\n"
            f"export OPENAI_API_BASE={v1}\n"
            f"export GOOGLE_GEMINI_BASE_URL={base}\n"
        )
    raise ValueError(f"no setup for {agent!r}; one of {', '.join(AGENTS)}")
