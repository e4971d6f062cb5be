"""Real coding agents (Claude Code, Codex) run offline against a scripted upstream.

The clients are the npm packages pinned in ``package.json`` here, installed by
``scripts/setup.sh`` outside the tracked tree (see :mod:`realclients.install`).
The upstream (:mod:`realclients.upstream`) speaks the Anthropic Messages API
and the OpenAI Responses API well enough for the clients to run a real tool
loop, plays a script turn by turn, checks every request it receives the way
the provider would, and records each one for the tests to read.

The tests point a client at :func:`realclients.fixtures.agent_base_url`,
which today is the upstream itself; a hop (the proxy) can be put between them
by registering it there, with no change to any test.
"""
