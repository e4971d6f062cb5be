"""Benchmark: what a request pays its store, per backend, for sessions with many cuts.

Every request checks each key its markers name in one round trip
(``missing``), and the first request of a long history keeps all its cuts in
one batch (``put_many``); both must fit well within ``Policy.store_timeout``
(one second), or the cuts are reported lost. For 100 to 2000 entries of 6 KB:

- ``put_many``: one batch of new entries;
- ``missing``: the presence check of all of them (the steady state of every request);
- ``get_many``: reading them all back in one call (a session started again);
- ``per entry``: ``put_many`` over the entries, against one ``put`` of a single
  entry on its own (what a request with one new cut pays).

``dir`` writes without flushing each entry to the disk (the default: a killed
process still leaves whole entries or none), ``dir-sync`` is ``dir:PATH?sync=1``.

    python bench/stores.py [--redis redis://127.0.0.1:6379/15] [--repeat N] [--out bench/results/stores.json]

The Redis backend is measured only when a server is named (its database is
written to; use a spare one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial

from _shared import REPO, store_scratch, write_result
from toolbudget.store import DirStore, RedisStore, SqliteStore, Store

SIZES = (100, 300, 1000, 2000)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", help="a Redis URL to measure too")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "stores.json"))
    args = parser.parse_args()
    rows = []
    with store_scratch() as tmp:
        stores: dict[str, Callable[[], Store]] = {
            "dir": lambda: DirStore(tempfile.mkdtemp(dir=tmp), sweep=False),
            "dir-sync": lambda: DirStore(tempfile.mkdtemp(dir=tmp), sweep=False, sync=True),
            "sqlite": lambda: SqliteStore(os.path.join(tempfile.mkdtemp(dir=tmp), "a.sqlite")),
        }
        if args.redis:
            stores["redis"] = lambda: RedisStore(args.redis)
        print(
            f"{'store':8s} {'entries':>7s} {'put_many ms':>12s} {'missing ms':>11s} {'get_many ms':>12s}"
            f" {'one put ms':>11s}"
        )
        for name, make in stores.items():
            for size in SIZES:
                puts, checks, reads, ones = [], [], [], []
                for run in range(args.repeat):
                    store = make()
                    session = f"bench-{size}-{run}-{os.getpid()}"
                    items = {os.urandom(16).hex(): os.urandom(6000) for _ in range(size)}
                    puts.append(timed(partial(store.put_many, session, items)))
                    checks.append(timed(partial(store.missing, session, list(items))))
                    reads.append(timed(partial(store.get_many, session, list(items))))
                    ones.append(timed(partial(store.put, session, os.urandom(16).hex(), os.urandom(6000))))
                    store.drop(session)
                    store.close()
                put, check = statistics.median(puts) * 1000, statistics.median(checks) * 1000
                read, one = statistics.median(reads) * 1000, statistics.median(ones) * 1000
                print(f"{name:8s} {size:7d} {put:12.1f} {check:11.2f} {read:12.1f} {one:11.3f}")
                rows.append(
                    {"store": name, "entries": size, "put_many_ms": put, "missing_ms": check}
                    | {"get_many_ms": read, "one_put_ms": one}
                )
    write_result(args.out, {"rows": rows})


if __name__ == "__main__":
    main()
