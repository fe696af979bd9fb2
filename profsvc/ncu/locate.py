"""Find the ncu binary and its version."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

from profsvc.proc import run_process

_VERSION = re.compile(r"Version\s+(\d+\.\d+\.\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class NcuInstall:
    """An ncu binary and the version it reports."""

    path: str
    version: str


async def find_ncu(explicit: str | None = None) -> NcuInstall | None:
    """The ncu to use (explicit path, else the one on PATH), None when there is none."""
    path = explicit or shutil.which("ncu")
    if not path:
        return None
    result = await run_process([path, "--version"], timeout=60)
    match = _VERSION.search(result.stdout + result.stderr)
    if not result.ok or not match:
        return None
    return NcuInstall(path=path, version=match.group(1))
