"""Tensors between the judge and the candidate's process: host copies in files the server hands over.

The judge never runs the candidate's code and never loads anything that could:
files from the candidate's process are read with torch's weights-only
unpickler (tensors, numbers, strings, lists, tuples and dicts of them; no
objects, no code). Each side removes a file once read: inputs of gigabytes
come once per trial.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# The only names a file may have to cross between the two processes (the server moves nothing else): the judge's
# status, or any file of its own, can never be one.
EXCHANGE_FILE = re.compile(r"^(?:init|in|out|timed|refill)-[0-9]{1,9}\.pt$")


def exchange_name(stem: str, serial: int) -> str:
    """The name of the judge's `serial`-th exchanged file (one of EXCHANGE_FILE's)."""
    name = f"{stem}-{serial}.pt"
    assert EXCHANGE_FILE.match(name), name
    return name


def to_host(value: Any, torch: Any) -> Any:
    """A copy of the value with every tensor on the CPU (nested lists and tuples kept)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").contiguous()
    if isinstance(value, list | tuple):
        return type(value)(to_host(v, torch) for v in value)
    return value


def to_device(value: Any, torch: Any) -> Any:
    """The value with every tensor moved to the current GPU (nested lists and tuples kept)."""
    if isinstance(value, torch.Tensor):
        return value.cuda() if not value.is_cuda else value
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, torch) for v in value)
    return value


def save(path: Path, value: Any, torch: Any) -> None:
    """Write a value (tensors copied to the host) for the other process."""
    torch.save(to_host(value, torch), path)


def load(path: Path, torch: Any) -> Any:
    """Read a value the candidate's process wrote: weights-only, so no code it holds can run here; read whole,
    not mapped, as that process could cut a mapped file short under the reader (a fault, not an error)."""
    return torch.load(path, map_location="cpu", weights_only=True)


def take(path: Path, torch: Any) -> Any:
    """Read a value the judge wrote, and remove its file: mapped, not read, so a large input is copied once (to
    the GPU) instead of twice, and left on disk no longer than its mapping (inputs of gigabytes come once per
    trial). The judge never touches a file once it is handed over."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    finally:
        path.unlink(missing_ok=True)
