"""Build a standalone CUDA C++ program with nvcc, through the build cache."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

from profsvc.build.cache import BuildCache, cache_key
from profsvc.build.diagnostics import parse_diagnostics
from profsvc.proc import run_process
from profsvc.sandbox import Sandbox
from profsvc_client.models import BuiltUnit, CompileResult

BINARY_NAME = "program"
LOG_LIMIT = 64 * 1024


@dataclass(frozen=True)
class ProgramBuild:
    """A built program (binary is None when the build failed)."""

    result: CompileResult
    binary: Path | None


async def build_cuda_program(
    *,
    source: str,
    file_name: str,
    flags: list[str],
    arch: str,
    nvcc: str,
    nvcc_version: str,
    cache: BuildCache,
    timeout: float,
    sandbox: Sandbox,
) -> ProgramBuild:
    """Compile `source` (with -lineinfo, for source-level counters) unless the cache has it."""
    key = cache_key({"kind": "cuda_program", "source": source, "flags": flags, "arch": arch, "nvcc": nvcc_version})
    start = time.monotonic()
    lock = await asyncio.to_thread(cache.acquire, key)
    try:
        directory = cache.directory(key)
        binary = directory / BINARY_NAME
        if binary.is_file():
            unit = BuiltUnit(name=file_name, cache_key=key, cached=True, seconds=time.monotonic() - start, route="nvcc")
            return ProgramBuild(CompileResult(ok=True, seconds=unit.seconds, units=[unit]), binary)
        (directory / file_name).write_text(source)
        partial = directory / (BINARY_NAME + ".partial")
        argv = [nvcc, "-O3", "-lineinfo", f"-arch={arch}", *flags, "-o", str(partial), file_name, "-ldl"]
        outcome = await run_process(sandbox.wrap_cpu(argv), cwd=directory, timeout=timeout, env=os.environ)
        log = (outcome.stdout + outcome.stderr)[-LOG_LIMIT:]
        if outcome.timed_out:
            log += f"\nnvcc did not finish within {timeout:.0f} s"
        seconds = time.monotonic() - start
        if not outcome.ok:
            return ProgramBuild(
                CompileResult(ok=False, diagnostics=parse_diagnostics(log), log=log, seconds=seconds), None
            )
        partial.replace(binary)
        unit = BuiltUnit(name=file_name, cache_key=key, cached=False, seconds=seconds, route="nvcc")
        result = CompileResult(ok=True, diagnostics=parse_diagnostics(log), log=log, seconds=seconds, units=[unit])
        return ProgramBuild(result, binary)
    finally:
        lock.close()
