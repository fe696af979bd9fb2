"""Sessions: each session's previous ProfileResult, so a new result can carry a delta against it.

A session belongs to the identity that named it (SessionKey): another caller's session of the same id is
another session, so one caller's delta never shows another's kernels.

Held in memory only, bounded three ways: at most `max_sessions` sessions per identity (its least
recently used goes first), at most `max_bytes` of results in all (each result's size is
estimated as the length of its JSON; over it, the identity holding the most gives up its oldest),
and no result older than `ttl_seconds`. So one caller naming many sessions evicts only its own.
Thread-safe: the scheduler's lanes finish jobs concurrently.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from profsvc_contract.models import ProfileResult

Clock = Callable[[], float]


@dataclass(frozen=True)
class SessionKey:
    """A session: the caller's identity (see profsvc.server.auth) and the id it chose."""

    identity: str
    id: str


@dataclass(frozen=True)
class _Entry:
    result: ProfileResult
    size: int
    stored_at: float


class SessionStore:
    """The previous result of each session, LRU-evicted under a count and a byte budget, expiring after a TTL."""

    def __init__(
        self,
        max_sessions: int = 256,
        max_bytes: int = 256 * 1024 * 1024,
        ttl_seconds: float = 3600.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if max_sessions < 1 or max_bytes < 1 or ttl_seconds <= 0:
            raise ValueError("max_sessions, max_bytes and ttl_seconds must be positive")
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._bytes = 0
        # Per identity: its sessions held and their bytes.
        self._counts: Counter[str] = Counter()
        self._owned: Counter[str] = Counter()
        self._lock = threading.Lock()

    def swap(self, session_id: Hashable, result: ProfileResult) -> ProfileResult | None:
        """Store `result` as the session's latest and return the one it replaces (None if none or expired).

        A result larger than the whole byte budget is not kept; the previous one is still returned.
        """
        size = len(result.model_dump_json())
        with self._lock:
            now = self._clock()
            self._expire(now)
            previous = self._pop(session_id)
            if size <= self.max_bytes:
                self._entries[session_id] = _Entry(result, size, now)
                self._bytes += size
                owner = _identity(session_id)
                self._counts[owner] += 1
                self._owned[owner] += size
                self._evict(owner)
        return previous.result if previous else None

    def __len__(self) -> int:
        with self._lock:
            self._expire(self._clock())
            return len(self._entries)

    @property
    def bytes_used(self) -> int:
        """Estimated bytes of the results held."""
        with self._lock:
            self._expire(self._clock())
            return self._bytes

    def _pop(self, session_id: Hashable) -> _Entry | None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._bytes -= entry.size
            owner = _identity(session_id)
            self._counts[owner] -= 1
            self._owned[owner] -= entry.size
        return entry

    def _oldest_of(self, owner: str) -> Hashable:
        return next(key for key in self._entries if _identity(key) == owner)

    def _expire(self, now: float) -> None:
        # Entries are in least-recently-stored order, so the expired ones are at the front.
        while self._entries:
            session_id, entry = next(iter(self._entries.items()))
            if now - entry.stored_at < self.ttl_seconds:
                break
            self._pop(session_id)

    def _evict(self, owner: str) -> None:
        while self._counts[owner] > self.max_sessions:
            self._pop(self._oldest_of(owner))
        while self._bytes > self.max_bytes:
            heaviest, _ = self._owned.most_common(1)[0]
            self._pop(self._oldest_of(heaviest))


def _identity(session_id: Hashable) -> str:
    """Whose session this is: a SessionKey's identity; one shared owner for bare ids."""
    return session_id.identity if isinstance(session_id, SessionKey) else ""
