"""Where job processes run: each in a cell of its own, inside the host's jail, on a warm worker or fresh.

A cell is a private folder: the one place a job process may write, mounted
into its jail at its own path. Everything the process needs from the job (its
sources, a report to read) is copied in by the server; everything the server
keeps (a status, a report, charts) is read or moved out once the process has
ended, and the cell is removed. A warm worker's cell is the folder it was
started in; a fresh process gets a new one. Each process also gets a control
channel (profsvc.scheduler.control) for what it must ask the server for.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

from profsvc.jail import Jail
from profsvc.jobenv import job_environment
from profsvc.jobfiles import remove_tree, remove_tree_soon
from profsvc.proc import Launch, ProcessResult, StartedProcess
from profsvc.scheduler.control import Handler, ServerChannel
from profsvc.scheduler.disk_guard import DiskGuard
from profsvc.scheduler.gpu_turns import GpuTurns
from profsvc.scheduler.warm_pool import StandbyGone, StandbyPool, StandbySpec, timing_name
from profsvc.telemetry import add_timing
from profsvc.worker.control import GPU_TURN

MakeArgv = Callable[[Path], list[str]]
# The first process of every job process (profsvc/worker/supervise.py, run as a file: it imports nothing of the
# package): it ends whatever the job's code left running once the job's worker has exited.
SUPERVISOR = Path(__file__).resolve().parents[1] / "worker" / "supervise.py"


def supervised(python: str, argv: Sequence[str]) -> list[str]:
    """`argv` below the supervisor; under ncu, ncu's target is the supervisor."""
    return [python, "-S", str(SUPERVISOR), "--", *argv]


class Cells:
    """Starts job processes in cells (see the module's text)."""

    def __init__(
        self,
        root: Path,
        jail: Jail | None,
        standby: StandbyPool,
        *,
        python: str,
        cuda_arch: str,
        base_handlers: Mapping[str, Handler],
        disk: DiskGuard,
        turns: GpuTurns,
    ) -> None:
        self.root = root
        self.turns = turns
        self.disk = disk
        self.python = python
        self.jail = jail
        self.standby = standby
        self.cuda_arch = cuda_arch
        self.base_handlers = dict(base_handlers)
        self._serial = itertools.count()
        self.root.mkdir(parents=True, exist_ok=True)

    def environment(self, cell: Path, gpu: int | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A job process's environment in its cell."""
        return job_environment(cell, gpu_index=gpu, cuda_arch=self.cuda_arch, extra=extra)

    def launch(
        self, argv: Sequence[str], cell: Path, *, gpu: bool, readonly: Sequence[Path], pass_fds: Sequence[int]
    ) -> Launch:
        """argv jailed in `cell` (as it is on a host run --unjailed)."""
        if self.jail is None:
            return Launch(argv=tuple(argv), pass_fds=tuple(pass_fds))
        return self.jail.launch(argv, writable=[cell], gpu=gpu, readonly=readonly, workdir=cell, pass_fds=pass_fds)

    def spec(
        self,
        command: Callable[[Path], list[str]],
        gpu: int | None,
        *,
        readonly: Sequence[Path] = (),
        extra: Mapping[str, str] | None = None,
        prime_lock: asyncio.Lock | None = None,
    ) -> StandbySpec:
        """A warm worker kind whose workers run in their own cells."""
        return StandbySpec(
            command=command,
            environment=lambda directory: self.environment(directory, gpu, extra),
            prime_lock=prime_lock,
            launch=lambda argv, directory, fds: self.launch(
                argv, directory, gpu=gpu is not None, readonly=readonly, pass_fds=fds
            ),
            # A GPU worker asks for its turn before its CUDA start (scheduler.gpu_turns).
            handlers=self.base_handlers if gpu is None else {**self.base_handlers, GPU_TURN: self.turns.handler(gpu)},
        )

    def new(self) -> Path:
        """A new, empty cell for a fresh process."""
        cell = self.root / f"cell-{os.getpid()}-{next(self._serial)}"
        remove_tree(cell)
        cell.mkdir()
        return cell

    @staticmethod
    def put(cell: Path, files: Mapping[str, str | bytes | Path]) -> None:
        """Copy the job's inputs into a cell (a Path: that file's content, copied without reading it all)."""
        for name, content in files.items():
            path = cell / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copyfile(content, path)
            elif isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)

    @contextlib.asynccontextmanager
    async def run(
        self,
        kind: str,
        make_argv: MakeArgv,
        *,
        files: Mapping[str, str | bytes | Path],
        gpu: int | None,
        timeout: float,
        readonly: Sequence[Path] = (),
        stdin: bytes | None = None,
        on_stdout: Callable[[str], None] | None = None,
        handlers: Mapping[str, Handler] | None = None,
        fresh: Callable[[list[str], Path], list[str]] | None = None,
        extra_env: Mapping[str, str] | None = None,
        while_running: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    ) -> AsyncIterator[tuple[ProcessResult, Path]]:
        """Run `make_argv(cell)` in a cell: the kind's warm worker where one is ready, else a fresh process
        (`fresh(argv, cell)` wraps its argv, e.g. in ncu). Yields how it ended and the cell, which lives until the
        block ends. `while_running()` is held from the job's hand-over to its process's end (a worker is taken
        first).
        """
        running = while_running or contextlib.nullcontext
        standby = await self.standby.take(kind) if kind else None
        if standby is not None:
            try:
                self.put(standby.directory, files)
                if self.jail is not None:
                    self.jail.own(standby.directory)
                if standby.channel is not None:
                    for op, handler in (handlers or {}).items():
                        standby.channel.attach(op, handler)
                argv = make_argv(standby.directory)
                text = stdin.decode() if stdin else ""
                try:
                    with running(), self.disk.running(standby.directory, standby.process):
                        result = await standby.run(
                            argv[3:], cwd=standby.directory, stdin=text, timeout=timeout, on_stdout=on_stdout
                        )
                        result = self.disk.explained(standby.directory, result)
                except StandbyGone:
                    result = None  # it died before taking the job: run the job fresh
                if result is not None:
                    add_timing(f"{timing_name(kind)}:run", result.seconds)
                    yield result, standby.directory
                    return
            finally:
                standby.discard()
        cell = self.new()
        channel = ServerChannel({**self.base_handlers, **(handlers or {})})
        try:
            self.put(cell, files)
            argv = supervised(self.python, make_argv(cell))
            argv = fresh(argv, cell) if fresh is not None else argv
            env = {**self.environment(cell, gpu, extra_env), **channel.environment()}
            launch = self.launch(argv, cell, gpu=gpu is not None, readonly=readonly, pass_fds=[channel.child_fd])
            process = await StartedProcess.start(
                argv, cwd=cell, env=env, stdin_data=stdin, on_stdout=on_stdout, launch=launch
            )
            channel.handed_over()
            with running(), self.disk.running(cell, process):
                result = self.disk.explained(cell, await process.finish(timeout))
            # A fresh process's time includes its start (Python, torch, ncu), which a warm worker paid ahead.
            add_timing(f"{timing_name(kind)}:fresh_run" if kind else "fresh_run", result.seconds)
            yield result, cell
        finally:
            channel.close()
            remove_tree_soon(cell)
