"""The proxy's Prometheus metrics, in base units with low-cardinality labels.

Each app has its own registry, so two proxies in one process (tests, a
benchmark) count apart. ``passthrough_bytes_modified`` counts the bytes of
streamed and passed-through answers that reached the client other than as the
upstream sent them; it must stay 0, and is measured, not assumed: the bytes
read from upstream are compared with the bytes written to the client.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ..model import Usage

__all__ = ["Metrics"]

_FAST = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
_SLOW = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Metrics:
    """Every counter and histogram of one proxy."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "toolbudget_requests", "Requests answered, by API and status.", ["api", "status"], registry=r
        )
        self.tokens = Counter(
            "toolbudget_tokens",
            "Prompt tokens: estimated before and after management, and as the upstream reported them.",
            ["stage", "cache"],
            registry=r,
        )
        self.output_tokens = Counter(
            "toolbudget_output_tokens", "Output tokens the upstream reported.", registry=r
        )
        self.chars_removed = Counter(
            "toolbudget_chars_removed",
            "Characters of tool results left out, by reason.",
            ["reason"],
            registry=r,
        )
        self.results_cut = Counter("toolbudget_results_cut", "Tool results cut.", registry=r)
        self.recovery = Counter(
            "toolbudget_recovery_attempts",
            "Retries at a recovery level after an overflow.",
            ["level"],
            registry=r,
        )
        self.escalations = Counter(
            "toolbudget_escalations", "max_tokens escalations and continuations.", ["kind"], registry=r
        )
        self.store_fallbacks = Counter(
            "toolbudget_store_fallbacks", "Cuts whose original the store could not keep.", registry=r
        )
        self.unmanaged = Counter(
            "toolbudget_unmanaged",
            "Requests sent upstream as the client sent them: their history could not be read.",
            ["api"],
            registry=r,
        )
        self.recalls = Counter(
            "toolbudget_recalls", "Recalls through the proxy, by outcome.", ["outcome"], registry=r
        )
        self.modified = Counter(
            "toolbudget_passthrough_bytes_modified",
            "Bytes of streamed or passed-through answers not sent as the upstream sent them (must stay 0).",
            registry=r,
        )
        self.modified.inc(0)
        self.manage_seconds = Histogram(
            "toolbudget_manage_duration_seconds",
            "Time the proxy spent before the upstream call.",
            buckets=_FAST,
            registry=r,
        )
        self.ttfb_seconds = Histogram(
            "toolbudget_upstream_ttfb_seconds",
            "Time to the upstream's answer head.",
            buckets=_SLOW,
            registry=r,
        )
        self.request_seconds = Histogram(
            "toolbudget_request_duration_seconds", "Whole request time.", buckets=_SLOW, registry=r
        )

    def watch(
        self, live: Callable[[], float], held: Callable[[], float], cached: Callable[[], float]
    ) -> None:
        """Gauges of the session pool, read when the metrics are: a soak sees what memory holds."""
        r = self.registry
        Gauge("toolbudget_sessions_live", "Live sessions in the pool.", registry=r).set_function(live)
        Gauge(
            "toolbudget_sessions_held_bytes",
            "JSON history bytes the live sessions hold (bounded by max_held_bytes).",
            registry=r,
        ).set_function(held)
        Gauge(
            "toolbudget_parse_cache_entries", "Parsed history entries the pool's caches hold.", registry=r
        ).set_function(cached)

    def usage(self, usage: Usage | None) -> None:
        """Count the tokens the upstream reported for one answer."""
        if usage is None:
            return
        for cache, value in (
            ("none", usage.input),
            ("read", usage.cache_read),
            ("creation", usage.cache_write),
        ):
            if value:
                self.tokens.labels("upstream", cache).inc(value)
        if usage.output:
            self.output_tokens.inc(usage.output)

    def render(self) -> bytes:
        return generate_latest(self.registry)
