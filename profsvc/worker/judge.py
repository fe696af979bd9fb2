"""The judge: decides correctness and times the reference, in a process the candidate's code never runs in.

Run as `python -m profsvc.worker.judge --reference REF --status OUT --mode M
...` (or as a warm worker) in a jail of its own that holds the reference's file
and not the candidate's. It makes every input, runs the reference, compares,
times, decides which flags fail the evaluation, and writes the status the
server trusts in its own cell, which no other process sees. The candidate runs
in its own process (profsvc.worker.candidate), driven through the server over
the control channel; tensors cross as host copies in files, read here with
torch's weights-only loader.

For a problem sent as one file (reference and candidate together), that file is
the reference too: its module-level code runs here as well, so the separation
holds where the reference comes apart (`--reference`, the agent tools'
`reference_code`). Its load_inline calls go to the server's build cache as the
candidate's do (the same build, found there): built here, in the judge's own
folder, each would cost a whole cold build on every check.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from profsvc.worker.benchmark import run_benchmark
from profsvc.worker.control import ControlChannel
from profsvc.worker.correctness import CandidateCall, OwnKernels, flatten, run_correctness
from profsvc.worker.exchange import exchange_name, load, save, to_device
from profsvc.worker.faults import fault_kind
from profsvc.worker.harness import exit_without_teardown, phase, warm_gpu
from profsvc.worker.inline_cache import InlineRecorder, install
from profsvc.worker.precision import DEFAULT_PRECISION, PRECISIONS, cast_values
from profsvc.worker.problem import ProblemError, load_reference
from profsvc.worker.shapes import JITTER
from profsvc.worker.warm import job_argv
from profsvc_contract.models import ModelTiming


class CandidateFailed(Exception):
    """The candidate's code raised: the result holds the error, located in the candidate's file."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(str(result.get("message", "")))
        self.result = result


class CandidateGone(Exception):
    """The candidate's process ended before it answered (a crash, a GPU fault, an exit of its own)."""

    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__(str(reply.get("output", "")))
        self.reply = reply


def init_seed(server_seed: int) -> int:
    """The seed both models are built with: derived from the server's, which the candidate never learns (it
    would predict every trial's inputs)."""
    digest = hashlib.sha256(f"{server_seed}:init".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def _number_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)


def _timing(value: Any) -> dict[str, Any]:
    """The candidate's timing of itself, checked for shape (its numbers are its process's to report)."""
    if not isinstance(value, dict) or not all(_number_list(value.get(k)) for k in ("_events_us", "_wall_us")):
        raise CandidateFailed({"kind": "worker_exit", "message": "the candidate's process sent a malformed timing"})
    if not isinstance(value.get("_kernel_sum_us"), int | float):
        raise CandidateFailed({"kind": "worker_exit", "message": "the candidate's process sent a malformed timing"})
    public = ModelTiming.model_validate({k: v for k, v in value.items() if not k.startswith("_")}).model_dump()
    return {**public, **{k: value[k] for k in ("_events_us", "_wall_us", "_kernel_sum_us")}}


class CandidateProcess:
    """The candidate's model as the judge sees it: each method is one command to its process."""

    def __init__(self, channel: ControlChannel, cell: Path, torch: Any, status: dict[str, Any]) -> None:
        self.channel = channel
        self.cell = cell
        self.torch = torch
        self._serial = 0
        # The judge's status, whose phases take the exchange's parts: tensors written and read for the other
        # process (with their host and device copies), and the waits for its answers.
        self.status = status

    def _name(self, stem: str) -> str:
        self._serial += 1
        return exchange_name(stem, self._serial)

    def _ask(self, command: dict[str, Any], files: list[str]) -> tuple[dict[str, Any], list[str]]:
        with phase(self.status, "candidate_wait"):
            reply = self.channel.request("candidate", command=command, files=files)
        if reply.get("gone"):
            raise CandidateGone(reply)
        result = reply.get("result")
        if not isinstance(result, dict):
            raise CandidateFailed({"kind": "worker_exit", "message": "the candidate's process sent no result"})
        if not result.get("ok"):
            raise CandidateFailed(result)
        returned = reply.get("files", [])
        return result, [f for f in returned if isinstance(f, str)]

    def _send(self, stem: str, value: Any) -> str:
        name = self._name(stem)
        with phase(self.status, "exchange"):
            save(self.cell / name, value, self.torch)
        return name

    def _receive(self, name: str, files: list[str]) -> Any:
        if name not in files:
            raise CandidateFailed({"kind": "worker_exit", "message": "the candidate's process sent no outputs"})
        try:
            with phase(self.status, "exchange"):
                return load(self.cell / name, self.torch)
        except Exception as error:  # anything it wrote that is not plain tensors is refused
            message = f"the candidate's process sent outputs that are not plain tensors ({type(error).__name__})"
            raise CandidateFailed({"kind": "runtime_error", "message": message}) from error
        finally:
            (self.cell / name).unlink(missing_ok=True)

    def init(self, init_inputs: list[Any], seed: int, precision: str) -> None:
        """Build the candidate's model in its process, from init inputs already cast to the precision; its process
        casts the model it built."""
        name = self._send("init", list(init_inputs))
        self._ask({"do": "init", "file": name, "seed": seed, "precision": precision}, [name])

    def call(self, inputs: list[Any], *, poison: bool, record: bool) -> CandidateCall:
        """One call on copies of `inputs`."""
        torch = self.torch
        name, out = self._send("in", list(inputs)), self._name("out")
        result, files = self._ask({"do": "call", "file": name, "out": out, "poison": poison, "record": record}, [name])
        returned = self._receive(out, files)
        if not isinstance(returned, dict) or not isinstance(returned.get("outputs"), list):
            raise CandidateFailed({"kind": "runtime_error", "message": "the candidate's process sent no outputs"})
        kernels, left = result.get("kernels", []), result.get("left_running", [])
        with phase(self.status, "exchange"):
            outputs = [to_device(v, torch) for v in returned["outputs"]]
            inputs = [to_device(v, torch) for v in returned.get("inputs", [])]
        return CandidateCall(
            outputs=outputs,
            inputs=inputs,
            aliases=str(result.get("aliases", "")),
            kernels=[str(k) for k in kernels] if isinstance(kernels, list) else [],
            left_running=[str(k) for k in left] if isinstance(left, list) else [],
        )

    def time(self, sets: list[list[Any]], warmup: int, trials: int) -> dict[str, Any]:
        """The candidate's timing of itself on these input sets."""
        names = [self._send("timed", list(inputs)) for inputs in sets]
        result, _ = self._ask({"do": "time", "files": names, "warmup": warmup, "trials": trials}, names)
        return _timing(result.get("timing"))

    def refill(self, values: list[Any]) -> list[Any]:
        """New values into its first timed input set's buffers, one call, its outputs."""
        name, out = self._send("refill", list(values)), self._name("out")
        _, files = self._ask({"do": "refill", "file": name, "out": out}, [name])
        returned = self._receive(out, files)
        outputs = returned.get("outputs") if isinstance(returned, dict) else None
        if not isinstance(outputs, list):
            raise CandidateFailed({"kind": "runtime_error", "message": "the candidate's process sent no outputs"})
        with phase(self.status, "exchange"):
            on_device = [to_device(v, self.torch) for v in outputs]
        return flatten(on_device, self.torch)

    def exit(self) -> None:
        """Tell its process the work is done."""
        self.channel.request("candidate", command={"do": "exit"}, files=[])


def _own_kernels(path: str) -> OwnKernels | None:
    if not path:
        return None
    data = json.loads(Path(path).read_text())
    return OwnKernels(names=frozenset(data["names"]), vendor=bool(data.get("vendor")))


def judge(args: argparse.Namespace, status: dict[str, Any], candidate: CandidateProcess, torch: Any) -> None:
    """Build both models, run what the mode asks; fill `status`."""
    import builtins

    builtins.popcorn_pri = JITTER  # type: ignore[attr-defined]
    builtins.profsvc_shapes = JITTER  # type: ignore[attr-defined]
    seed = int(json.loads(sys.stdin.readline())["seed"])
    models_seed = init_seed(seed)
    precision = args.precision
    timed = (args.timed_calls, args.warmup, seed, torch, models_seed, precision, partial(phase, status))
    with phase(status, "setup"):
        problem = load_reference(Path(args.reference))
        JITTER.nominal()
        if not args.no_candidate:
            candidate.init(cast_values(problem.get_init_inputs(), precision, torch), models_seed, precision)
    if args.no_candidate:
        # A published problem's reference, timed alone.
        with phase(status, "benchmark"):
            status["benchmark"] = run_benchmark(problem, None, *timed)
        status["ok"] = True
        return
    if args.mode in ("correctness", "evaluate"):
        own = _own_kernels(args.own_kernels)
        with phase(status, "correctness"):
            status["correctness"] = run_correctness(
                problem, candidate, args.trials, seed, torch, own, models_seed, precision
            )
    if args.mode in ("benchmark", "evaluate"):
        with phase(status, "benchmark"):
            status["benchmark"] = run_benchmark(problem, candidate, *timed)
    status["ok"] = True


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module's text)."""
    argv = job_argv(argv, warm=warm_gpu)
    parser = argparse.ArgumentParser(description="profsvc judge")
    parser.add_argument("--reference", required=True, help="module holding Model, get_inputs, get_init_inputs")
    parser.add_argument("--cache", required=True, help="the server's build cache (read-only here)")
    parser.add_argument("--status", required=True, help="where to write the JSON status")
    parser.add_argument("--mode", choices=("correctness", "benchmark", "evaluate"), required=True)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--timed-calls", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--own-kernels", default="", help="JSON file: the candidate's own kernel names")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION)
    parser.add_argument("--no-candidate", action="store_true", help="time the reference alone (benchmark)")
    args = parser.parse_args(argv)
    import torch

    channel = ControlChannel.from_environment()
    status: dict[str, Any] = {"ok": False, "stage": "running"}
    reference_file = Path(args.reference).name
    if channel is None:
        status.update(kind="worker_exit", message="the judge has no channel to the candidate's process")
    else:
        candidate = CandidateProcess(channel, Path(args.status).parent, torch, status)
        gone = False
        try:
            # As the candidate's process builds (the harness's --lineinfo): one cache entry serves both.
            text = Path(args.reference).read_text()
            install(Path(args.cache), lineinfo=True, user_text=text, recorder=InlineRecorder(), channel=channel)
            judge(args, status, candidate, torch)
        except CandidateFailed as failure:
            fields = ("kind", "message", "detail", "line", "stage")
            status.update({k: failure.result[k] for k in fields if k in failure.result})
            status.setdefault("kind", "runtime_error")
        except CandidateGone as ended:
            gone = True
            output = str(ended.reply.get("output", ""))
            died = str(ended.reply.get("died", "")) or f"exit status {ended.reply.get('returncode')}"
            status.update(
                kind=fault_kind(output) or "crash",
                message=f"the candidate's process died ({died})",
                detail=output[-4000:],
            )
        except ProblemError as error:
            status.update(kind="missing_symbol", message=str(error))
        except BaseException as error:  # the reference's code may raise anything
            from profsvc.worker.harness import located

            status.update(located(error, {reference_file}, reference_file))
        finally:
            if not gone:
                with contextlib.suppress(ConnectionError, OSError):
                    candidate.exit()
    # Written aside, then put in place: whatever lies at the status's name by then is replaced.
    written = Path(args.status).with_name(Path(args.status).name + ".new")
    status["written_at"] = time.monotonic()
    written.write_text(json.dumps(status))
    written.replace(args.status)
    exit_without_teardown(0 if status["ok"] else 1)


if __name__ == "__main__":
    sys.exit(main())
