"""The candidate's side of a correctness check or a benchmark: runs what the judge asks, decides nothing.

Run by the harness in mode `candidate`, in a jail of its own, which holds the
candidate's file and not the reference's. It asks the server for the judge's
next command over its control channel and answers with what happened; tensors
travel as files in its cell (profsvc.worker.exchange), moved by the server. The
verdict, the reference and the status the server trusts are the judge's
(profsvc.worker.judge), in a process this code never shares.

Commands: `init` (import the candidate's module, build ModelNew from the
init inputs and cast it to the judge's precision), `call` (one call on the given inputs: outputs and the inputs as
the call left them, optionally the kernels it launched and those it left running), `time` (the timing
loop of profsvc.worker.timing on input sets), `refill` (new values into the
timed input buffers, then one call), `exit`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profsvc.worker.control import ControlChannel
from profsvc.worker.correctness import clone_inputs, flatten, outputs_alias_inputs, poison_allocator
from profsvc.worker.exchange import save, take, to_device
from profsvc.worker.faults import fault_kind
from profsvc.worker.precision import cast_model
from profsvc.worker.problem import load_candidate
from profsvc.worker.timing import launched_kernels, time_model


class _Candidate:
    """The candidate's model and the state the commands share."""

    def __init__(self, main: Path, cell: Path, torch: Any, located: Callable[[BaseException], dict[str, Any]]) -> None:
        self.main = main
        self.cell = cell
        self.torch = torch
        self.located = located
        self.model: Any = None
        self.timed_sets: list[list[Any]] = []
        # Taken before the candidate's module is imported: it cannot swap the marker for a no-op of its own.
        self.marker = torch._C._cuda_sleep

    def init(self, command: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        torch = self.torch
        model_new = load_candidate(self.main)
        init_inputs = take(self.cell / command["file"], torch)
        torch.manual_seed(int(command["seed"]))
        model = model_new(*init_inputs)
        if isinstance(model, torch.nn.Module):
            # Cast here, by profsvc's code: the judge compares dtypes, so a model that refuses the cast fails.
            model = cast_model(model.cuda().eval(), str(command["precision"]), torch)
        self.model = model
        return {"ok": True}, []

    def call(self, command: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        torch = self.torch
        inputs = to_device(take(self.cell / command["file"], torch), torch)
        if command.get("poison"):
            poison_allocator(torch)
        kernels: list[str] = []
        left: list[str] = []
        with torch.no_grad():
            # The kernels it launches are recorded on a call of their own, after this one: a GPU fault then
            # surfaces here, outside the profiler, whose stop can hang on a broken context (seen on an H200).
            pristine = clone_inputs(inputs, torch) if command.get("record") else None
            outputs = self.model(*inputs)
            torch.cuda.synchronize()
            if pristine is not None:
                kernels, left = launched_kernels(self.model, pristine, torch, self.marker)
        flat = flatten(outputs, torch)
        aliases = outputs_alias_inputs(flat, inputs, torch)
        save(self.cell / command["out"], {"outputs": flat, "inputs": inputs}, torch)
        return {"ok": True, "aliases": aliases, "kernels": kernels, "left_running": left}, [command["out"]]

    def time(self, command: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        torch = self.torch
        self.timed_sets = [to_device(take(self.cell / name, torch), torch) for name in command["files"]]
        with torch.no_grad():
            timing = time_model(self.model, self.timed_sets, int(command["warmup"]), int(command["trials"]), torch)
        return {"ok": True, "timing": timing}, []

    def refill(self, command: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        torch = self.torch
        fresh = take(self.cell / command["file"], torch)
        buffers = self.timed_sets[0]
        for buffer, value in zip(buffers, fresh, strict=True):
            if isinstance(buffer, torch.Tensor):
                buffer.copy_(value)
        with torch.no_grad():
            outputs = flatten(self.model(*buffers), torch)
            torch.cuda.synchronize()
        save(self.cell / command["out"], {"outputs": outputs}, torch)
        return {"ok": True}, [command["out"]]


def serve_judge(
    main: Path, cell: Path, channel: ControlChannel, torch: Any, located: Callable[[BaseException], dict[str, Any]]
) -> None:
    """Answer the judge's commands until it says `exit` (or the server closes the channel)."""
    candidate = _Candidate(main, cell, torch, located)
    handlers = {"init": candidate.init, "call": candidate.call, "time": candidate.time, "refill": candidate.refill}
    command = channel.request("next")
    while command.get("do") in handlers:
        try:
            result, files = handlers[command["do"]](command)
        except BaseException as error:  # the user's code may raise anything, SystemExit included
            text = str(error)
            result = {"ok": False, **located(error), "fault": fault_kind(text) or ""}
            result.setdefault("detail", traceback.format_exc()[-2000:])
            files = []
        command = channel.request("next", result=result, files=files)
