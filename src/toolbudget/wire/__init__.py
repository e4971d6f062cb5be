"""The five wire APIs: one module each, with ``parse(body) -> Request`` and ``render(Request) -> body``."""
