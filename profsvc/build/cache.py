"""A content-addressed build cache shared by every job and kept across restarts.

A build's key is the SHA-256 of everything that decides its output (sources,
flags, compiler and library versions, target architecture). The same key means
the same build, so a source is never built twice; a per-key lock file keeps
two jobs from building the same key at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from pathlib import Path
from typing import Any, TextIO


def cache_key(parts: dict[str, Any]) -> str:
    """Stable hash of a build's inputs (any JSON-serialisable mapping)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class BuildCache:
    """Build directories keyed by content, under one root."""

    def __init__(self, root: Path) -> None:
        # Its real path: jails mount it read-only there (a linked cache, shared by a node's workers, too).
        root.mkdir(parents=True, exist_ok=True)
        self.root = root.resolve()

    def directory(self, key: str) -> Path:
        """The build directory of a key (created on demand)."""
        path = self.root / key
        path.mkdir(parents=True, exist_ok=True)
        return path

    def acquire(self, key: str) -> TextIO:
        """Block until the key's lock is held; closing the returned file releases it."""
        handle = (self.directory(key) / ".lock").open("w")
        fcntl.flock(handle, fcntl.LOCK_EX)
        return handle
