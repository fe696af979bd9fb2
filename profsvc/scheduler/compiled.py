"""Python problems that built before: a repeat of the same source skips its compile worker.

An agent sends one candidate to compile, correctness, profile and submit in turn;
each would start the compile step again (import the module, find its builds in
the cache). The outcome of a successful compile is kept here by the source's
digest, as long as the build folders it names still hold their libraries. The compile
step's status is written by the job, whose code chose what it says: only builds in
folders of the server's cache are looked at, and an outcome naming any other is not
kept (the server never probes a path a job picked).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from pathlib import Path

from profsvc.build.inline_builder import is_route_folder
from profsvc.build.python_problem import HarnessStatus
from profsvc.scheduler.jobs import SourceSpec
from profsvc_contract.models import CompileResult

CAPACITY = 512


def source_digest(source: SourceSpec) -> str:
    """The digest of everything in a source that decides its build."""
    parts = [source.kind.name, source.main_name, source.main_text, source.reference_name, source.reference_text]
    parts += list(source.nvcc_flags)
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


class CompiledSources:
    """The last successful compile of recently seen sources (least recently used goes first)."""

    def __init__(self, cache_root: Path, capacity: int = CAPACITY) -> None:
        self.cache_root = cache_root
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[CompileResult, HarnessStatus]] = OrderedDict()

    def get(self, source: SourceSpec) -> tuple[CompileResult, HarnessStatus] | None:
        """The remembered compile, marked as served from the cache; None when unknown or its builds are gone."""
        key = source_digest(source)
        entry = self._entries.get(key)
        if entry is None:
            return None
        result, status = entry
        if not all(self._in_cache(b) and any(Path(b["build_directory"]).glob("*.so")) for b in status.builds):
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        units = [unit.model_copy(update={"cached": True, "seconds": 0.0}) for unit in result.units]
        return result.model_copy(update={"seconds": 0.0, "units": units}), status

    def put(self, source: SourceSpec, result: CompileResult, status: HarnessStatus) -> None:
        """Remember a successful compile."""
        if not result.ok or not status.ok or not all(self._in_cache(b) for b in status.builds):
            return
        key = source_digest(source)
        self._entries[key] = (result, status)
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def _in_cache(self, build: dict[str, object]) -> bool:
        """Whether a build the status names is a folder of the server's cache: a key's, one level below its root
        (`cache/..` has the cache as its parent too, as a path)."""
        folder = build.get("build_directory")
        if not isinstance(folder, str):
            return False
        path = Path(folder)
        return path.parent == self.cache_root and is_route_folder(path.name)
