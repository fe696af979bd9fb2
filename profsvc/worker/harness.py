"""The worker process: import and build a problem, then run what the mode asks.

Run as `python -m profsvc.worker.harness ...`. Modes: compile (import only),
profile (under ncu: warm up outside the NVTX range, so the range holds exactly
the kernels of one measured call: no warm-up, no reference, no torch start-up
kernels; inputs and weights cast to the job's precision, as the judge casts
them), and candidate (the candidate's side of a correctness check or a
benchmark, driven by the judge: profsvc.worker.candidate). It never raises: it
writes what happened to the status file (JSON) and exits 0, or 1 when the
user's code failed.
"""

from __future__ import annotations

import argparse
import builtins
import ctypes
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NoReturn

from profsvc.metrics.nvtx import MEASURED_RANGE, PROFILER_WARMUP_RANGE, PROFSVC_DOMAIN
from profsvc.worker.candidate import serve_judge
from profsvc.worker.control import GPU_TURN, ControlChannel
from profsvc.worker.exchange import to_device
from profsvc.worker.faults import fault_kind, says_no_gpu
from profsvc.worker.inline_cache import InlineRecorder, install
from profsvc.worker.prebuild import BUILD_ERROR_PREFIX, prebuild
from profsvc.worker.precision import DEFAULT_PRECISION, PRECISIONS, cast_model, cast_values
from profsvc.worker.problem import ProblemError, load_problem
from profsvc.worker.shapes import JITTER
from profsvc.worker.warm import WARM_LIBRARIES, WARM_PROFILER, job_argv


def _frames_in(error: BaseException, files: set[str]) -> list[traceback.FrameSummary]:
    """The error's traceback frames in the given files (the harness's own frames say nothing to the user)."""
    return [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename).name in files]


def _user_frames(error: BaseException, user_files: set[str]) -> str:
    """The traceback limited to the user's own files."""
    lines = [
        f"  {Path(f.filename).name}, line {f.lineno}, in {f.name}\n    {f.line}" for f in _frames_in(error, user_files)
    ]
    return "\n".join([*lines, f"{type(error).__name__}: {error}"])


def _user_line(error: BaseException, main_file: str) -> int:
    """The line of the main file the error last passed through (0 when it did not)."""
    frames = _frames_in(error, {main_file})
    return (frames[-1].lineno or 0) if frames else 0


def _located(error: BaseException, user_files: set[str]) -> str:
    """One line: the error and the last user line it passed through."""
    frames = _frames_in(error, user_files)
    where = f" ({Path(frames[-1].filename).name} line {frames[-1].lineno}, in {frames[-1].name})" if frames else ""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first}{where}"


def _any_on_host(value: Any, torch: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return not value.is_cuda
    if isinstance(value, list | tuple):
        return any(_any_on_host(v, torch) for v in value)
    return False


def located(error: BaseException, user_files: set[str], main_file: str) -> dict[str, Any]:
    """A user error's status fields: kind, one located line, the traceback in the user's files, the line."""
    if isinstance(error, ProblemError):
        return {"kind": "missing_symbol", "message": str(error)}
    kind = fault_kind(str(error)) or "runtime_error"
    message, detail = _located(error, user_files), _user_frames(error, user_files)
    return {"kind": kind, "message": message, "detail": detail, "line": _user_line(error, main_file)}


@contextmanager
def phase(status: dict[str, Any], name: str) -> Iterator[None]:
    """Time one phase of the job into status["phases"] (seconds; names in build.python_problem.HARNESS_PHASES),
    added to what the phase took before (the judge's exchange comes in many parts)."""
    start = time.monotonic()
    try:
        yield
    finally:
        phases = status.setdefault("phases", {})
        phases[name] = phases.get(name, 0.0) + time.monotonic() - start


def _needs_a_gpu(error: BaseException, torch: Any) -> bool:
    """Whether `error` is the GPU being unavailable here (torch sees none), and not a fault of the module's."""
    if torch.cuda.is_available():
        return False
    chain: BaseException | None = error
    while chain is not None:
        if says_no_gpu(str(chain)):
            return True
        chain = chain.__cause__ or chain.__context__
    return False


def run(args: argparse.Namespace, status: dict[str, Any], recorder: InlineRecorder) -> None:
    """Import, build and (unless compiling without a GPU) run the candidate; fill `status`."""
    main = Path(args.main)
    reference = Path(args.reference) if args.reference else None
    install(
        Path(args.cache),
        lineinfo=args.lineinfo,
        user_text=main.read_text(),
        recorder=recorder,
        channel=ControlChannel.from_environment(),
    )
    import torch

    # The shape-jitter helper problem files use as `popcorn_pri` (or `profsvc_shapes`).
    builtins.popcorn_pri = JITTER  # type: ignore[attr-defined]
    builtins.profsvc_shapes = JITTER  # type: ignore[attr-defined]
    seed = args.seed
    if args.mode == "candidate":
        # The judge decides; this process only runs the candidate's calls and reports them.
        status["stage"] = "running"
        channel = ControlChannel.from_environment()
        if channel is None:
            raise ProblemError("the candidate's process has no channel to the judge")
        user_files = {main.name}
        serve_judge(main, main.parent, channel, torch, lambda error: located(error, user_files, main.name))
        status["ok"] = True
        return
    status["stage"] = "compiling"
    with phase(status, "load"):
        try:
            problem = load_problem(main, reference, candidate_needed=args.target == "candidate")
        except Exception as error:
            if args.mode != "compile" or not _needs_a_gpu(error, torch):
                raise
            # A module that touches the GPU at import (a stream, a tensor on the device), or builds what only a
            # CUDA build of torch builds, cannot be imported here; what it built before that point is in the
            # cache, the rest is built when the GPU job imports it.
            status["warnings"] = [
                f"the module needs CUDA at import, which this compile step lacks "
                f"({located(error, {main.name}, main.name)['message']}): "
                "its import, and any build after that point, happen in the GPU job"
            ]
            status["ok"] = True
            return
    if args.mode == "compile":
        # No GPU here: extensions the module builds lazily (on its first call) are built now where their
        # arguments are known statically, so the GPU job finds them in the cache.
        with phase(status, "prebuild"):
            prebuilt = prebuild(sys.modules[main.stem])
        if prebuilt.without_cuda:
            # An OK with nothing built would read as "the CUDA code compiles": say what was not checked.
            status["warnings"] = [
                f"{prebuilt.without_cuda} load_inline build(s) not made: this server's torch ({torch.__version__}) "
                "has no CUDA, so the CUDA code was not compiled; a server with a CUDA build of torch compiles it"
            ]
        status["ok"] = True
        return
    status["stage"] = "running"
    import nvtx

    precision = args.precision
    torch.manual_seed(seed)
    with torch.no_grad():
        chosen = problem.model_new if args.target == "candidate" else problem.model
        model = chosen(*cast_values(list(problem.get_init_inputs()), precision, torch))
        if isinstance(model, torch.nn.Module):
            model = cast_model(model.cuda().eval(), precision, torch)
        given = list(problem.get_inputs())
        inputs = cast_values(to_device(given, torch), precision, torch)
        if _any_on_host(given, torch):
            # Published problems make their inputs on the CPU; the measured call must not hold the copies.
            status.setdefault("warnings", []).append(
                "get_inputs() returned CPU tensors: they were moved to the GPU before the measured call"
            )
        with phase(status, "first_call"):
            # The first call also runs lazy load_inline builds; their errors are told apart by message.
            model(*inputs)
            torch.cuda.synchronize()
        with phase(status, "warmup"):
            for _ in range(args.warmup):
                model(*inputs)
            torch.cuda.synchronize()
        # Under ncu this call holds every replay pass of the kernels in the range. The range is in profsvc's own
        # domain: no range the user's code opens, whatever its name, is taken for it.
        with phase(status, "measured_call"):
            nvtx.push_range(args.range, domain=PROFSVC_DOMAIN)
            model(*inputs)
            nvtx.pop_range(domain=PROFSVC_DOMAIN)
            torch.cuda.synchronize()
    status["ok"] = True


def wait_for_gpu_turn() -> None:
    """Before a warm worker's CUDA start: wait until the server says no profile runs on its GPU."""
    channel = ControlChannel.from_environment()
    if channel is None:
        return
    try:
        channel.request(GPU_TURN)
    except (OSError, ValueError) as error:
        # Replies are matched by order: a job's requests on this channel would get this one's reply.
        raise SystemExit(f"no answer to the warm-up's GPU turn: {error}") from error
    finally:
        channel.detach()


def warm_gpu() -> None:
    """What a warm worker pays before its job: torch, its extension builder and, with a GPU, a CUDA context."""
    import torch
    import torch.utils.cpp_extension

    if os.environ.get(WARM_PROFILER) == "1":
        # The measured call's range: imported now, not on a profile's clock (0.07 s on a 2-core machine).
        import nvtx  # noqa: F401
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return
    wait_for_gpu_turn()
    # Creates the context without launching a kernel (under ncu, nothing to profile yet).
    torch.cuda.mem_get_info()
    if os.environ.get(WARM_LIBRARIES) == "1":
        # A timing run's first matmul starts cuBLAS, its first kernel records start CUPTI: pay both now.
        from torch.profiler import ProfilerActivity, profile

        weights = torch.ones(8, 8, device="cuda")
        with profile(activities=[ProfilerActivity.CUDA]):
            torch.nn.functional.linear(weights, weights)
            torch.cuda.synchronize()


def _prime() -> None:
    """A warm worker under ncu: profile one kernel in the warm-up range, which the report's analysis skips.

    ncu's first profiled kernel in a process costs about 0.65 s more than the next, with one pass or 27
    (measured on the H200: tools/gpu_overhead.py); paid here, before the job. torch's spin kernel
    (`torch.cuda._sleep`) comes from a module of its own, which the report embeds: a fill kernel's module
    added 2.3 MB to every report.
    """
    import nvtx
    import torch

    nvtx.push_range(PROFILER_WARMUP_RANGE, domain=PROFSVC_DOMAIN)
    torch.cuda._sleep(1)
    nvtx.pop_range(domain=PROFSVC_DOMAIN)
    torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point of the worker process (or a warm worker: `--standby DIR --server-pid PID`)."""
    argv = job_argv(argv, warm=warm_gpu, prime=_prime)
    parser = argparse.ArgumentParser(description="profsvc worker harness")
    parser.add_argument("--main", required=True, help="problem (or candidate) module")
    parser.add_argument("--reference", default="", help="separate reference module")
    parser.add_argument("--cache", required=True, help="content-addressed build cache root")
    parser.add_argument("--status", required=True, help="where to write the JSON status")
    parser.add_argument("--mode", choices=("compile", "profile", "candidate"), default="profile")
    parser.add_argument("--lineinfo", action="store_true", help="build CUDA sources with -lineinfo")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--range", default=MEASURED_RANGE, help="NVTX range around the measured call, profsvc's domain")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", choices=("candidate", "reference"), default="candidate", help="model to run")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION)
    args = parser.parse_args(argv)
    recorder = InlineRecorder()
    status: dict[str, Any] = {"ok": False, "stage": "compiling"}
    user_files = {Path(args.main).name} | ({Path(args.reference).name} if args.reference else set())
    try:
        run(args, status, recorder)
    except ProblemError as error:
        status.update(kind="missing_symbol", message=str(error))
    except BaseException as error:  # the user's code may raise anything, SystemExit included
        text = str(error)
        if BUILD_ERROR_PREFIX in text:
            status.update(stage="compiling", kind="compile_error", message=text.splitlines()[0], build_log=text)
        else:
            status.update(located(error, user_files, Path(args.main).name))
            if status["stage"] == "compiling" and status["kind"] == "runtime_error":
                status["kind"] = "import_error"
    status["builds"] = recorder.as_dicts()
    status["written_at"] = time.monotonic()
    Path(args.status).write_text(json.dumps(status))
    exit_without_teardown(0 if status["ok"] else 1)


def exit_without_teardown(code: int) -> NoReturn:
    """End the process now: the job is done and its status written.

    Python's teardown of torch and the CUDA context runs on the job's clock; the driver frees the context at
    exit anyway. Under ncu too: the report holds every metric of the profiled kernel all the same, and ncu ends
    0.26 to 0.37 s sooner (an H100, tools/exit_cost.py).
    """
    # The user's code may have replaced or closed sys.stdout: flush what can be flushed, the originals too.
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with suppress(Exception):
            stream.flush()  # type: ignore[union-attr]
    ctypes.CDLL(None).fflush(None)  # the C library's buffers too: host code of an extension may printf
    os._exit(code)


if __name__ == "__main__":
    main()
