"""The compaction schedule's last decision, kept with the archive so a session started again resumes.

The cache-aware schedule (:mod:`toolbudget.compaction`) is a pure function of
the history: a session started again (a restarted proxy, another replica, a
stateless worker) gets its levels by deciding again at every earlier request
point, which on a long session costs more than the rest of the request. So
when a request writes to the store anyway, the schedule's state after its
last request point goes into the same batch: the applied level of every
result, the turns folded away, the two running costs, and the points where
an event fired. A cold session reads the records of its request's last few
points in the read-back's one ``get_many`` and resumes from the newest that
checks out.

A record is used only when everything the decisions up to its point are
computed from is the same: every message's size as sent and which messages
begin assistant turns, every result's place, turn, size and flags, the
request's frame (window, system prompt and tools, price model), the cold
points, the policy's fingerprint and a digest of the code. These are the
schedule's whole input: two histories that agree on them get the same levels
from a walk from scratch, so a record that checks out gives the very bytes
that walk gives. The record's text also carries a digest of itself: a torn
or mismatched one is decided again, never used.

Records are written in a batch the request makes anyway (its cuts, the
records of its previews, its arrival), and at every :data:`EVERY`-th point
also when the request wrote nothing: then the store's worker writes it
between requests (a long session that stopped cutting long ago otherwise left
its newest record hundreds of points back, and a cold session decided every
point since: 1,625 points of the 2,000-turn session's last request). A cold
session looks for the newest two such points besides its last few, in the
same read. The session's own records begin with ``\\x00toolbudget: `` so
``stats`` and recall skip them. Store entries are never replaced, so the first record of a
point stands: another conversation sharing the session's id, or a history
whose earlier messages changed, finds that it does not check out and decides
again.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .codedigest import PolicyTexts, digest_of, package_root

if TYPE_CHECKING:
    from .compaction import SlotInfo

__all__ = ["EVERY", "PREFIX", "Decided", "Inputs", "code_digest", "decode", "encode", "name", "policy_text"]

PREFIX = "\x00toolbudget: schedule\x00"
"""What a record's name and text begin with: one of the session's own records, never an original."""

_CODE = ("compaction.py", "schedulerecord.py", "measure.py", "prices.py", "models.py", "policy.py")
"""The modules whose code decides the schedule's levels."""

LOOK_BACK = 4
"""How many of a request's last points a cold session looks for a record at."""

EVERY = 16
"""Every this many request points (the 16th, the 32nd...), the decision is kept whatever the
request wrote, so a cold session decides at most about this many points again."""


@functools.cache
def code_digest() -> str:
    """A digest of the schedule's code: a record of another version is never read back."""
    root = package_root()
    return digest_of([root / file for file in _CODE], b"toolbudget-plan")


policy_text = PolicyTexts(code_digest)
"""The code's digest and the policy's fingerprint, worked out once per policy object
(``""`` when nothing names this code: then no record is kept or read)."""


def name(policy: str, end: int) -> str:
    """What the record of the point whose request holds ``end`` messages is keyed by."""
    return f"{PREFIX}{policy}\x00{end}"


class Inputs:
    """A running digest of what the schedule's decisions up to a point are computed from.

    Fed in message order (the messages' sizes as sent, the messages that begin
    assistant turns, and the results they hold, each its own stream), so a
    history that only grew is fed its new messages alone.
    """

    __slots__ = ("_sizes", "_slots", "_starts", "messages", "slots")

    def __init__(self) -> None:
        self._sizes = hashlib.blake2b(digest_size=16, person=b"plan-sizes")
        self._starts = hashlib.blake2b(digest_size=16, person=b"plan-starts")
        self._slots = hashlib.blake2b(digest_size=16, person=b"plan-slots")
        self.messages = 0
        """How many messages were fed."""
        self.slots = 0
        """How many results were fed."""

    def feed(self, end: int, sizes: Sequence[int], starts: Sequence[int], slots: Sequence[SlotInfo]) -> None:
        """Feed the messages up to ``end`` (of ``sizes``), the turn ``starts`` and the results among them."""
        begin, k = self.messages, self.slots
        if end <= begin:
            return
        self._sizes.update(array("q", sizes[begin:end]).tobytes())
        self._starts.update(
            array("q", starts[bisect_left(starts, begin) : bisect_left(starts, end)]).tobytes()
        )
        first = k
        while k < len(slots) and slots[k].msg < end:
            k += 1
        fed = [
            value
            for slot in slots[first:k]
            for value in (
                slot.msg,
                slot.turn_no,
                slot.size,
                slot.eligible + 2 * slot.keeps_errors + 4 * slot.shrinkable,
            )
        ]
        self._slots.update(array("q", fed).tobytes())
        self.messages, self.slots = end, k

    def digest(self, frame: str, cold: Iterable[int]) -> str:
        """The digest of what was fed, with the frame (window, fixed, price, policy) and the cold points."""
        final = hashlib.blake2b(digest_size=16, person=b"toolbudget-plan")
        for part in (self._sizes, self._starts, self._slots):
            final.update(part.digest())
        final.update(f"{self.messages}\x00{self.slots}\x00{frame}\x00".encode())
        final.update(",".join(map(str, sorted(cold))).encode())
        return final.hexdigest()


@dataclass(frozen=True, slots=True)
class Decided:
    """The schedule's state after deciding at one request point."""

    end: int
    """Where the point's request ends (how many messages it holds)."""
    inputs: str
    """The :class:`Inputs` digest of everything the decisions up to the point were made from."""
    levels: tuple[int, ...]
    """The applied level of each result present at the point."""
    folded: int
    unmanaged: float
    eager: float
    events: tuple[int, ...]
    """The request points (by index) up to this one where an event fired."""


def encode(decided: Decided) -> bytes:
    """The record's text: its head, its fields one a line, and a digest of all before it."""
    levels = base64.b64encode(zlib.compress(bytes(decided.levels), 1)).decode()
    body = "\n".join(
        (
            f"{PREFIX}{decided.end}",
            decided.inputs,
            str(len(decided.levels)),
            levels,
            str(decided.folded),
            decided.unmanaged.hex(),
            decided.eager.hex(),
            ",".join(map(str, decided.events)),
        )
    )
    return f"{body}\n{_check(body)}".encode()


def decode(data: bytes, end: int) -> Decided | None:
    """The record ``data`` holds for the point ``end``, or ``None`` unless it is one, whole."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    body, _, check = text.rpartition("\n")
    fields = body.split("\n")
    if len(fields) != 8 or fields[0] != f"{PREFIX}{end}" or _check(body) != check:
        return None
    _, inputs, count, packed, folded, unmanaged, eager, events = fields
    try:
        levels = tuple(zlib.decompress(base64.b64decode(packed, validate=True)))
        decided = Decided(
            end,
            inputs,
            levels,
            int(folded),
            float.fromhex(unmanaged),
            float.fromhex(eager),
            tuple(int(e) for e in events.split(",")) if events else (),
        )
    except (ValueError, zlib.error):
        return None
    if str(len(levels)) != count or any(level > 3 for level in levels):
        return None
    return decided


def _check(body: str) -> str:
    return hashlib.blake2b(body.encode(), digest_size=12, person=b"toolbudget-plan").hexdigest()
