"""What a compaction event will make is made between requests, by the store's worker.

Each request's results that a later event may cut get their key, preview and
summary made once the request has returned (:mod:`toolbudget.ahead`), so the
event finds them made. These tests hold the three things that make that safe:
the event then makes none of them on the caller's thread; every request sends
the same bytes as a session whose worker made nothing ahead, and a fresh
session reads back what they sent; nothing is archived ahead (an original is
kept by the request whose marker names it); and the worker makes one result
a step.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from test_archive_lifetime import history, outputs
from test_readback import Made, bodies
from toolbudget import ahead, budget, wire
from toolbudget.model import Conversation
from toolbudget.policy import Policy
from toolbudget.session import Session

# Every request compacts the results two turns old: each request from the third on is an event.
POLICY = Policy(compaction="eager", tool_caps={})


def _requests(count: int) -> list[dict[str, Any]]:
    outs = outputs(count, size=6000)
    return [history(outs[:n]) for n in range(1, count + 1)]


def _loop(root: Path, requests: list[dict[str, Any]], made: Made) -> tuple[list[bytes], list[int]]:
    """Each request's managed bytes, and how many previews and summaries each made itself."""
    sent: list[bytes] = []
    counts: list[int] = []
    with Session("ahead-made", store=f"dir:{root}", policy=POLICY) as session:
        for body in requests:
            assert session.settle(10.0)  # the seconds an agent waits for its model
            made.count = 0
            managed = session.manage(orjson.loads(orjson.dumps(body)), "anthropic")
            sent.append(orjson.dumps(managed.body))
            counts.append(made.count)
    return sent, counts


def test_an_event_finds_made_what_it_cuts_and_sends_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = _requests(8)
    made = Made(monkeypatch)
    sent, counts = _loop(tmp_path, requests, made)

    # The request that first sent a form made ahead kept its record, as if it had made it: a fresh
    # session reads every one back.
    made.count = 0
    with Session("ahead-made", store=f"dir:{tmp_path}", policy=POLICY) as fresh:
        again = orjson.dumps(fresh.manage(orjson.loads(orjson.dumps(requests[-1])), "anthropic").body)
    assert again == sent[-1]
    assert made.count == 0
    shutil.rmtree(tmp_path / "toolbudget-ahead-made")

    # The same session, store and id with nothing made ahead.
    monkeypatch.setattr(ahead, "candidates", lambda *args, **kwargs: [])
    without, counts_without = _loop(tmp_path, requests, made)

    assert sent == without  # request by request, byte for byte
    assert sum(counts_without) > 0  # the events made their previews and summaries themselves
    assert counts[2:] == [0] * len(counts[2:])  # here every one was made before its event came
    assert any(b"[toolbudget: " in body for body in sent)  # the events did cut


def test_nothing_is_archived_ahead(tmp_path: Path) -> None:
    """Until a marker names it, an original is not in the store: made ahead means made in memory."""
    requests = _requests(2)
    with Session("ahead-none", store=f"dir:{tmp_path}", policy=POLICY) as session:
        for body in requests:
            managed = session.manage(body, "anthropic")
            assert session.settle(10.0)
            assert not managed.report.cuts
        assert not list((tmp_path / "toolbudget-ahead-none" / "tool-results").glob("*.txt"))


def test_the_worker_makes_one_result_a_step(tmp_path: Path) -> None:
    """A store call that comes while the worker works ahead (the next request's) waits for one
    result's forms at most, not for a whole history's (a cold session's first request)."""
    request = wire.parse(history(outputs(3, size=6000)), "anthropic")
    with Session("ahead-step", store=f"dir:{tmp_path}", policy=POLICY) as session:
        found = ahead.candidates(request.messages, POLICY.microcompact_min_chars)
        assert [text for text, _, _ in found] == outputs(3, size=6000)
        run = ahead.step(session.archive, POLICY, request, found)
        made = budget._known(session.archive).summaries
        counts = []
        while run():
            counts.append(len(made))
        assert counts == [1, 2, 3]


@pytest.mark.shared
@pytest.mark.parametrize("api", ["anthropic", "openai-chat"])
def test_every_shared_session_sends_the_same_bytes_with_forms_made_ahead(
    real: list[tuple[str, Conversation]], api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Request by request, on every conversation of the shared transcripts: the worker's forms
    change nothing that is sent."""
    policy = Policy()
    finding = ahead.candidates
    made = 0

    def counted(*args: Any) -> None:
        nonlocal made
        made += 1
        budget.make_ahead(*args)

    monkeypatch.setattr("toolbudget.ahead.make_ahead", counted)
    compared = 0
    for n, (name, conversation) in enumerate(real):
        requests = [orjson.dumps(body) for body in bodies(conversation, api)]
        sent = []
        for ahead_of_events in (True, False):
            monkeypatch.setattr(ahead, "candidates", finding if ahead_of_events else lambda *a, **k: [])
            root = tmp_path / f"s{n}"  # the same root both times: markers name its paths
            with Session(f"shared-{n}", store=f"dir:{root}", policy=policy) as session:
                out = []
                for raw in requests:
                    assert session.settle(10.0)
                    out.append(orjson.dumps(session.manage(orjson.loads(raw), api).body))
            shutil.rmtree(root)
            sent.append(out)
        assert sent[0] == sent[1], name
        compared += len(requests)
    assert compared > 4000 and made > 200  # results whose forms the worker made
