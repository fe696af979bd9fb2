"""Correctness and timing on a leased GPU: the judge in one cell, the candidate's process in another.

They never talk directly: a relay (scheduler.relay) pairs the judge's requests with the candidate's. Built on
the core (scheduler.scheduler) like evaluation.py, which reads the judge's status into results.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from pathlib import Path

from profsvc.build.python_problem import HarnessStatus, harness_argv
from profsvc.proc import ProcessResult
from profsvc.scheduler.jobs import ProgressSink, SourceSpec
from profsvc.scheduler.relay import Relay
from profsvc.scheduler.scheduler import JUDGE_MODULE, Scheduler
from profsvc.staticcheck.own_kernels import own_kernel_names
from profsvc_contract.models import CompileResult, Stage, Target

# How long the candidate's process gets to exit once the judge is done.
CANDIDATE_EXIT_S = 5.0


async def run_checks(
    scheduler: Scheduler,
    source: SourceSpec,
    mode: str,
    options: dict[str, int | str],
    progress: ProgressSink | None = None,
    own_kernel: bool = True,
) -> tuple[CompileResult, HarnessStatus | None]:
    """Build, then run `mode` (correctness, benchmark, evaluate) on a GPU: the judge in one cell, the
    candidate's process in another (profsvc.worker.judge); the judge's status is the answer. `options`: the
    judge's (trials, timed-calls, warmup, precision).
    `own_kernel`: a call that launches no kernel of the candidate's own fails correctness."""
    scheduler.require_gpu()
    async with scheduler.admit(progress) as job:
        compiled = (await scheduler.build(job, source)).compile
        if not compiled.ok:
            return compiled, None
        async with scheduler.gpu_lease(job) as gpu:
            job.progress(Stage.RUNNING, f"running {mode} on GPU {gpu}")
            with scheduler.telemetry.stage(mode):
                status, judge = await _judged(scheduler, source, mode, options, gpu, own_kernel)
        scheduler.record_phases(mode, status, judge.ended, judge.seconds)
        job.progress(Stage.DONE, "done")
        return compiled, status


async def _judged(
    scheduler: Scheduler, source: SourceSpec, mode: str, options: dict[str, int | str], gpu: int, own_kernel: bool
) -> tuple[HarnessStatus, ProcessResult]:
    """The judge and the candidate's process, paired by a relay; the judge's status, and how its process ended."""
    relay = Relay()
    status_name = f"{mode}-status.json"
    timeout = scheduler.config.limits.job_timeout_s
    # The judge holds the reference (the whole file where the problem comes as one), the candidate's process
    # its own file alone.
    reference_name, reference_text = (
        (source.reference_name, source.reference_text)
        if source.reference_name
        else (source.main_name, source.main_text)
    )
    names, vendor = await scheduler.parsers.run(own_kernel_names, source.main_text, size=source.text_size)
    judge_files: dict[str, str | bytes] = {
        reference_name: reference_text,
        "own-kernels.json": json.dumps({"names": sorted(names), "vendor": vendor}),
    }

    def judge_argv(cell: Path) -> list[str]:
        relay.judge_cell = cell
        command = [scheduler.config.python, "-m", JUDGE_MODULE, "--reference", str(cell / reference_name)]
        command += ["--cache", str(scheduler.cache.root)]
        command += ["--status", str(cell / status_name), "--mode", mode]
        # The options a mode names (trials, timed-calls, warmup, precision); the judge's defaults for the others.
        for name, value in options.items():
            command += [f"--{name}", str(value)]
        if alone:
            return [*command, "--no-candidate"]
        return [*command, "--own-kernels", str(cell / "own-kernels.json")] if own_kernel else command

    def candidate_argv(cell: Path) -> list[str]:
        relay.candidate_cell = cell
        main = cell / source.main_name
        return harness_argv(
            scheduler.config.python, main, None, scheduler.cache.root, cell / "status.json", "candidate"
        )

    async def candidate() -> None:
        process = None
        try:
            async with scheduler.cells.run(
                f"run-gpu{gpu}",
                candidate_argv,
                files={source.main_name: source.main_text},
                gpu=gpu,
                timeout=timeout,
                readonly=[scheduler.cache.root],
                handlers={"next": relay.candidate_next},
            ) as (process, _):
                pass
        finally:
            relay.candidate_ended(process)

    alone = source.target == Target.REFERENCE
    running = asyncio.get_running_loop().create_task(candidate() if not alone else asyncio.sleep(0))
    # A fresh secret per job, read by the judge from stdin: the candidate's process never sees it.
    secret = json.dumps({"seed": secrets.randbits(62)}).encode() + b"\n"
    try:
        async with scheduler.cells.run(
            f"judge-gpu{gpu}",
            judge_argv,
            files=judge_files,
            gpu=gpu,
            timeout=timeout,
            readonly=[scheduler.cache.root],
            stdin=secret,
            handlers={"candidate": relay.judge_command},
        ) as (judge, cell):
            status = HarnessStatus.read(
                cell / status_name, returncode=judge.returncode, timed_out=judge.timed_out, output=judge.stderr
            )
    finally:
        relay.judge_ended()
        # The candidate's process was told to exit: a moment for that, then it is killed.
        done, _ = await asyncio.wait([running], timeout=CANDIDATE_EXIT_S)
        if not done:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
    return status, judge
