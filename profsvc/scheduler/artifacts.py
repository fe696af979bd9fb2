"""Job workspaces and the artifacts (reports, charts) results name.

An artifact id is "<job id>.<file name>"; both parts are checked against a
strict pattern, so an id can never name a path outside the jobs folder.
Only the newest `keep` workspaces are kept.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

from profsvc_client.models import ArtifactRef

_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
CONTENT_TYPES = {
    ".ncu-rep": "application/x-ncu-report",
    ".json": "application/json",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


class Workspaces:
    """Per-job folders under one root, pruned to the newest `keep`."""

    def __init__(self, root: Path, keep: int) -> None:
        self.root = root
        self.keep = keep
        self.root.mkdir(parents=True, exist_ok=True)

    def create(self) -> tuple[str, Path]:
        """A new job id and its empty workspace."""
        job_id = uuid.uuid4().hex
        path = self.root / job_id
        path.mkdir()
        return job_id, path

    def prune(self) -> None:
        """Delete all but the newest `keep` workspaces."""
        jobs = sorted((p for p in self.root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in jobs[self.keep :]:
            shutil.rmtree(old, ignore_errors=True)

    def artifact(self, job_id: str, path: Path) -> ArtifactRef:
        """Reference to a file inside a job's workspace."""
        suffix = ".ncu-rep" if path.name.endswith(".ncu-rep") else path.suffix
        return ArtifactRef(
            id=f"{job_id}.{path.name}",
            name=path.name,
            content_type=CONTENT_TYPES.get(suffix, "application/octet-stream"),
            size=path.stat().st_size,
        )

    def resolve(self, artifact_id: str) -> Path | None:
        """The file an artifact id names, None when the id is malformed or the file is gone."""
        job_id, _, name = artifact_id.partition(".")
        if not _JOB_ID.match(job_id) or not _FILE_NAME.match(name):
            return None
        path = self.root / job_id / name
        return path if path.is_file() else None
