"""Build a standalone CUDA C++ program with nvcc, in a cell, through the verified build cache."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from profsvc.build.cache import cache_key
from profsvc.build.diagnostics import parse_diagnostics
from profsvc.build.service import BuildCacheIndex
from profsvc.proc import ProcessResult
from profsvc_contract.models import BuiltUnit, CompileResult

BINARY_NAME = "program"
LOG_LIMIT = 64 * 1024
_BUILT = "built"


@dataclass(frozen=True)
class ProgramBuild:
    """A built program (binary is None when the build failed), and the folder nvcc compiled it in."""

    result: CompileResult
    binary: Path | None
    compiled_in: str = ""


class Cells(Protocol):
    """Where the build runs (profsvc.scheduler.cells.Cells): a fresh cell in the host's jail."""

    def run(
        self,
        kind: str,
        make_argv: Callable[[Path], list[str]],
        *,
        files: Mapping[str, str | bytes],
        gpu: int | None,
        timeout: float,
    ) -> AbstractAsyncContextManager[tuple[ProcessResult, Path]]:
        """Run make_argv(cell) in a cell."""
        ...


_locks: dict[str, asyncio.Lock] = {}


async def build_cuda_program(
    *,
    source: str,
    file_name: str,
    flags: list[str],
    arch: str,
    nvcc: str,
    nvcc_version: str,
    index: BuildCacheIndex,
    cells: Cells,
    timeout: float,
) -> ProgramBuild:
    """Compile `source` (with -lineinfo, for source-level counters) unless the cache has it verified.

    nvcc runs jailed in a cell (the user's flags and includes reach only what the jail shows); the server
    moves the binary into the cache and records its hash.
    """
    key = cache_key({"kind": "cuda_program", "source": source, "flags": flags, "arch": arch, "nvcc": nvcc_version})
    start = time.monotonic()
    directory = index.cache_root / key
    async with _locks.setdefault(key, asyncio.Lock()):
        if await asyncio.to_thread(index.verified, key):
            built_in = (directory / _BUILT).read_text() if (directory / _BUILT).is_file() else ""
            unit = BuiltUnit(name=file_name, cache_key=key, cached=True, seconds=time.monotonic() - start, route="nvcc")
            result = CompileResult(ok=True, seconds=unit.seconds, units=[unit])
            return ProgramBuild(result, directory / BINARY_NAME, built_in)

        def argv(cell: Path) -> list[str]:
            output = cell / key / BINARY_NAME
            output.parent.mkdir(exist_ok=True)
            return [nvcc, "-O3", "-lineinfo", f"-arch={arch}", *flags, "-o", str(output), str(cell / file_name), "-ldl"]

        async with cells.run("", argv, files={file_name: source}, gpu=None, timeout=timeout) as (outcome, cell):
            log = (outcome.stdout + outcome.stderr)[-LOG_LIMIT:]
            if outcome.timed_out:
                log += f"\nnvcc did not finish within {timeout:.0f} s"
            seconds = time.monotonic() - start
            if not outcome.ok or not (cell / key / BINARY_NAME).is_file():
                return ProgramBuild(
                    CompileResult(ok=False, diagnostics=parse_diagnostics(log), log=log, seconds=seconds), None
                )
            (cell / key / _BUILT).write_text(str(cell))
            await asyncio.to_thread(index.install, cell / key, key, [BINARY_NAME, _BUILT])
        if not index.verified(key):
            message = "the built program could not be installed in the cache"
            return ProgramBuild(CompileResult(ok=False, log=message, seconds=seconds), None)
        unit = BuiltUnit(name=file_name, cache_key=key, cached=False, seconds=seconds, route="nvcc")
        result = CompileResult(ok=True, diagnostics=parse_diagnostics(log), log=log, seconds=seconds, units=[unit])
        return ProgramBuild(result, directory / BINARY_NAME, str(cell))
