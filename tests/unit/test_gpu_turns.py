"""Warm workers start their CUDA work while no profile runs on their GPU (profsvc.scheduler.gpu_turns)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from profsvc.scheduler.cells import Cells
from profsvc.scheduler.gpu_turns import GpuTurns
from profsvc.scheduler.warm_pool import StandbySpec
from profsvc.telemetry import collect_timings
from profsvc.worker.control import GPU_TURN
from tests.conftest import unjailed_cells

ROOT = Path(__file__).resolve().parents[2]
# A worker's CUDA start, as a warm worker asks for it: prints how long it waited for its turn.
ASKS = (
    "import sys, time\n"
    f"sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'contract')!r}]\n"
    "from profsvc.worker.harness import wait_for_gpu_turn\n"
    "start = time.monotonic()\n"
    "wait_for_gpu_turn()\n"
    "waited = time.monotonic() - start\n"
    "from profsvc.worker.control import ControlChannel\n"
    "assert ControlChannel.from_environment().request('after').get('ok')\n"
    "print(waited)\n"
)
# A warm GPU worker's warm-up: says it asks for its turn (a file), then asks.
WARM_ASKS = (
    "import pathlib\n"
    "from profsvc.worker.harness import wait_for_gpu_turn\n"
    "from profsvc.worker.warm import job_argv\n"
    "def warm():\n"
    "    pathlib.Path('asking').write_text('')\n"
    "    wait_for_gpu_turn()\n"
    "job_argv(None, warm=warm)\n"
)
# A warm worker that sleeps its job's first argument (the warm path of Cells.run).
SLEEPER = (
    "import sys, time\n"
    "from profsvc.worker.warm import job_argv\n"
    "time.sleep(float(job_argv(None, warm=lambda: None)[0]))\n"
)


def test_a_turn_waits_for_the_profile_on_its_gpu_only():
    async def body() -> tuple[bool, bool, bool, float]:
        turns = GpuTurns()
        with turns.profiling(0):
            other_gpu = await turns.turn(1, limit=0.1)
            cut_short = await turns.turn(0, limit=0.2)
            waiting = asyncio.create_task(turns.turn(0))
            await asyncio.sleep(0.3)
            still_waiting = not waiting.done()
            start = time.monotonic()
        quiet = await waiting
        return other_gpu, cut_short, still_waiting and quiet, time.monotonic() - start

    other_gpu, cut_short, waited_then_quiet, after_end = asyncio.run(body())
    assert other_gpu
    assert not cut_short  # the limit: a warm worker never waits for long
    assert waited_then_quiet and after_end < 0.5


def test_two_profiles_on_one_gpu_keep_it_busy_until_both_end():
    async def body() -> list[bool]:
        turns = GpuTurns()
        seen = []
        with turns.profiling(0):
            with turns.profiling(0):
                pass
            seen.append(await turns.turn(0, limit=0.1))
        seen.append(await turns.turn(0, limit=0.1))
        return seen

    assert asyncio.run(body()) == [False, True]


def test_only_gpu_workers_may_ask_for_a_turn(tmp_path):
    cells = unjailed_cells(tmp_path)
    command = lambda directory: ["true"]  # noqa: E731
    assert GPU_TURN in (cells.spec(command, 0).handlers or {})
    assert GPU_TURN not in (cells.spec(command, None).handlers or {})


def test_a_workers_cuda_start_waits_over_its_channel_until_the_profile_ends(tmp_path):
    async def asks(profiling: bool) -> float:
        turns = GpuTurns()
        cells = unjailed_cells(tmp_path, turns=turns)
        asked = asyncio.Event()
        answer = turns.handler(0)

        async def gpu_turn(request: dict[str, Any]) -> dict[str, Any]:
            asked.set()
            return await answer(request)

        async def after(_request: dict[str, Any]) -> dict[str, Any]:
            return {"ok": True}

        handlers = {GPU_TURN: gpu_turn, "after": after}
        argv = lambda cell: [sys.executable, "-c", ASKS]  # noqa: E731
        with turns.profiling(0) if profiling else contextlib.nullcontext():
            job = asyncio.create_task(_run(cells, argv, handlers))
            if profiling:
                # However long the process took to ask, the profile goes on 0.5 s after the question.
                await asyncio.wait_for(asked.wait(), 60)
                await asyncio.sleep(0.5)
        return await job

    assert asyncio.run(asks(profiling=True)) >= 0.4
    assert asyncio.run(asks(profiling=False)) < 0.4


def test_the_profile_is_held_from_the_hand_over_to_its_process_end(tmp_path):
    cells = unjailed_cells(tmp_path)
    events: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def running() -> Iterator[None]:
        events.append(("held", time.monotonic()))
        yield
        events.append(("let go", time.monotonic()))

    async def body() -> float:
        argv = lambda cell: [sys.executable, "-c", "import time; time.sleep(1)"]  # noqa: E731
        async with cells.run("", argv, files={}, gpu=None, timeout=60, while_running=running) as (result, _):
            assert [name for name, _ in events] == ["held", "let go"]
            return result.seconds

    seconds = asyncio.run(body())
    assert events[1][1] - events[0][1] >= min(seconds, 1.0) - 0.1


def test_a_warm_workers_job_is_held_from_its_hand_over_to_its_end(tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    cells = unjailed_cells(tmp_path)
    path = os.pathsep.join([str(ROOT), str(ROOT / "contract")])
    spec = StandbySpec(
        command=lambda d: [sys.executable, str(tmp_path / "sleeper.py"), "--standby", str(d), "--server-pid", "0"],
        environment=lambda d: {**os.environ, "PYTHONPATH": path},
    )
    held: list[float] = []

    @contextlib.contextmanager
    def running() -> Iterator[None]:
        start = time.monotonic()
        yield
        held.append(time.monotonic() - start)

    async def body() -> bool:
        cells.standby.keep("sleeper", spec)
        try:
            argv = lambda cell: [sys.executable, "-m", "sleeper", "1"]  # noqa: E731
            with collect_timings() as timings:
                async with cells.run("sleeper", argv, files={}, gpu=None, timeout=60, while_running=running) as ran:
                    ok = ran[0].returncode == 0
            return ok and "sleeper:run" in timings  # it ran on the warm worker
        finally:
            await cells.standby.close()

    assert asyncio.run(body())
    assert held and held[0] >= 0.9  # the job's one second, on the warm worker


def test_a_wait_for_a_warm_worker_is_logged_with_its_wait_for_its_turn(tmp_path, caplog):
    (tmp_path / "asks.py").write_text(WARM_ASKS)
    turns = GpuTurns()
    cells = unjailed_cells(tmp_path, turns=turns)
    worker = [sys.executable, str(tmp_path / "asks.py")]
    spec = cells.spec(lambda d: [*worker, "--standby", str(d), "--server-pid", "0"], 0)

    async def body() -> None:
        try:
            with turns.profiling(0):
                cells.standby.keep("asks", spec)
                deadline = time.monotonic() + 60
                while not any(cells.standby.root.glob("asks-*/asking")) and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                # A job comes for the worker while it waits for its turn; the profile goes on 0.5 s.
                taking = asyncio.create_task(cells.standby.take("asks"))
                await asyncio.sleep(0.5)
            standby = await asyncio.wait_for(taking, 60)
            assert standby is not None
            standby.discard()
            await standby.process.finish(5)
        finally:
            await cells.standby.close()

    with caplog.at_level(logging.INFO, logger="profsvc.standby"):
        asyncio.run(body())
    (message,) = [r.getMessage() for r in caplog.records if "a job waited" in r.getMessage()]
    said = re.search(
        r"came up ([\d.]+) s after its start; "
        r"it asked gpu_turn at ([\d.]+) s, answered at ([\d.]+) s",
        message,
    )
    assert said, message
    came_up, asked, answered = map(float, said.groups())
    assert answered - asked >= 0.4 and answered <= came_up


async def _run(cells: Cells, argv, handlers) -> float:
    async with cells.run("", argv, files={}, gpu=None, timeout=60, handlers=handlers) as (result, _):
        assert result.returncode == 0, result.stderr
        return float(result.stdout.strip().splitlines()[-1])


def test_a_warm_gpu_worker_asks_for_its_turn_before_its_cuda_start(monkeypatch):
    import torch

    from profsvc.worker import harness

    calls: list[str] = []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.delenv("PROFSVC_WARM_LIBRARIES", raising=False)
    monkeypatch.setattr(harness, "wait_for_gpu_turn", lambda: calls.append("turn"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: calls.append("cuda") or (0, 0))
    harness.warm_gpu()
    assert calls == ["turn", "cuda"]
