"""Job workspaces and the artifacts (reports, charts) results name.

GetArtifact serves only what the server registered when it made a result: an artifact id is a key into that
registry, never a path built from the id. The file is opened below the jobs folder one component at a time,
none of them followed if it is a symbolic link, and served only if it is a regular file with one link: a job
that plants a link (to a TLS key, say) in its workspace, or swaps its workspace for one, gets nothing.

Finished workspaces are pruned, oldest first, to at most `keep` of them holding at most `keep_bytes`
together. A workspace is finished when its job is; the folders an earlier run left count as finished (their
artifacts are not served: the registry is this run's).
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import stat
import uuid
from pathlib import Path
from typing import BinaryIO

from profsvc.jobfiles import NOFOLLOW_DIRECTORY, open_regular_at
from profsvc_contract.models import ArtifactRef

_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
CONTENT_TYPES = {
    ".ncu-rep": "application/x-ncu-report",
    ".json": "application/json",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".html": "text/html",
}


def tree_bytes(path: Path) -> int:
    """Bytes of the regular files under `path`, links not followed."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


class Workspaces:
    """Per-job folders under one root, the artifacts registered in them, pruned by count and by bytes."""

    def __init__(self, root: Path, keep: int, keep_bytes: int) -> None:
        self.root = root
        self.keep = keep
        self.keep_bytes = keep_bytes
        self.root.mkdir(parents=True, exist_ok=True)
        # Finished workspaces, oldest first: job id -> bytes.
        self._finished: collections.OrderedDict[str, int] = collections.OrderedDict()
        # Artifact id -> (job id, path inside the job's workspace).
        self._artifacts: dict[str, tuple[str, str]] = {}
        earlier = [p for p in self.root.iterdir() if p.is_dir() and not p.is_symlink() and _JOB_ID.match(p.name)]
        for path in sorted(earlier, key=lambda p: p.stat().st_mtime):
            self._finished[path.name] = tree_bytes(path)
        self.prune()

    def create(self) -> tuple[str, Path]:
        """A new job id and its empty workspace."""
        job_id = uuid.uuid4().hex
        path = self.root / job_id
        path.mkdir()
        return job_id, path

    def finish(self, job_id: str) -> None:
        """The job is over: its workspace now counts against the budgets, and the oldest go."""
        self._finished[job_id] = tree_bytes(self.root / job_id)
        self.prune()

    @property
    def bytes_kept(self) -> int:
        """Bytes of the finished workspaces kept."""
        return sum(self._finished.values())

    def prune(self) -> None:
        """Delete the oldest finished workspaces until at most `keep` holding at most `keep_bytes` remain."""
        total = self.bytes_kept
        while self._finished and (len(self._finished) > self.keep or total > self.keep_bytes):
            job_id, size = self._finished.popitem(last=False)
            total -= size
            shutil.rmtree(self.root / job_id, ignore_errors=True)
            for artifact_id in [a for a, (job, _) in self._artifacts.items() if job == job_id]:
                del self._artifacts[artifact_id]

    def artifact(self, job_id: str, path: Path) -> ArtifactRef:
        """Register a file of a job's workspace as an artifact, and reference it."""
        relative = path.relative_to(self.root / job_id)
        artifact_id = f"{job_id}.{relative.as_posix().replace('/', '.')}"
        self._artifacts[artifact_id] = (job_id, relative.as_posix())
        suffix = ".ncu-rep" if path.name.endswith(".ncu-rep") else path.suffix
        return ArtifactRef(
            id=artifact_id,
            name=path.name,
            content_type=CONTENT_TYPES.get(suffix, "application/octet-stream"),
            size=path.lstat().st_size,
        )

    def open(self, artifact_id: str) -> tuple[str, BinaryIO] | None:
        """The registered artifact's name and its file, opened for reading; None when the id is unknown, the
        file is gone, or anything on its way is a link or not what it should be."""
        registered = self._artifacts.get(artifact_id)
        if registered is None:
            return None
        job_id, relative = registered
        *folders, name = [job_id, *relative.split("/")]
        descriptors: list[int] = []
        try:
            descriptors.append(os.open(self.root, NOFOLLOW_DIRECTORY))
            for folder in folders:
                descriptors.append(os.open(folder, NOFOLLOW_DIRECTORY, dir_fd=descriptors[-1]))
            file = open_regular_at(descriptors[-1], name)
        except OSError:
            return None
        finally:
            for descriptor in descriptors:
                os.close(descriptor)
        return (name, file) if file is not None else None
