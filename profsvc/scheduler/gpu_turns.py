"""Profiles before warm-ups on a GPU: a warm worker starts its CUDA work while no profile runs there.

A CUDA context made on a GPU while ncu profiles a kernel there lengthens the profile's measured call: on an H200,
2.83 s with two processes making contexts beside it against 2.25 to 2.38 s alone, where eight busy CPU loops or
four torch imports beside it changed nothing (tools/ncu_timeline.py, one or two runs each; loops of a whole
warm-up, mostly importing torch, made too few contexts in one run to show). In an agent's back-to-back loop the
warm workers that replace the ones just taken make theirs during the next profile: holding them back took the
unprimed measured call there from 2.64 to 2.30 s (benchmarks/RESULTS.md). So a warm worker asks for its turn
(`gpu_turn` on its control channel, profsvc.worker.harness.wait_for_gpu_turn) before its CUDA start, and the
server answers once no profile runs on its GPU. It never waits longer than TURN_LIMIT_S: a worker still warming
when a job wants it would cost that job more.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from profsvc.scheduler.control import Handler

# At most this long a warm worker waits for its turn (a warm profile takes 2 to 3 s).
TURN_LIMIT_S = 10.0


class GpuTurns:
    """Whether a profile runs on each GPU, and the warm workers' turns to start their CUDA work."""

    def __init__(self) -> None:
        self._profiles: dict[int, int] = {}
        self._quiet: dict[int, asyncio.Event] = {}

    def _event(self, gpu: int) -> asyncio.Event:
        if gpu not in self._quiet:
            self._quiet[gpu] = asyncio.Event()
            self._quiet[gpu].set()
        return self._quiet[gpu]

    @contextlib.contextmanager
    def profiling(self, gpu: int) -> Iterator[None]:
        """Held while a profile runs under ncu on `gpu`: warm workers there wait for their turn."""
        self._profiles[gpu] = self._profiles.get(gpu, 0) + 1
        self._event(gpu).clear()
        try:
            yield
        finally:
            self._profiles[gpu] -= 1
            if not self._profiles[gpu]:
                self._event(gpu).set()

    async def turn(self, gpu: int, limit: float = TURN_LIMIT_S) -> bool:
        """Return once no profile runs on `gpu` (True), or after `limit` seconds (False)."""
        try:
            async with asyncio.timeout(limit):
                await self._event(gpu).wait()
        except TimeoutError:
            return False
        return True

    def handler(self, gpu: int) -> Handler:
        """The `gpu_turn` request of a warm worker on `gpu`: answered at its turn."""

        async def answer(_request: dict[str, Any]) -> dict[str, Any]:
            await self.turn(gpu)
            return {"ok": True}

        return answer
