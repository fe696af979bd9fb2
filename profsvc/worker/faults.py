"""Name the GPU fault behind an exception, so a crash becomes a structured error."""

from __future__ import annotations

import signal

# Substrings of CUDA's error strings (as torch and the runtime print them) -> fault kind.
CUDA_FAULTS = (
    ("an illegal memory access was encountered", "illegal_memory_access"),
    ("misaligned address", "misaligned_address"),
    ("device-side assert triggered", "device_assert"),
    ("unspecified launch failure", "kernel_trap"),
    ("an illegal instruction was encountered", "kernel_trap"),
    ("illegal instruction", "kernel_trap"),
    ("out of memory", "out_of_memory"),
    ("launch timed out", "kernel_timeout"),
    ("too many resources requested for launch", "launch_resources"),
    ("invalid configuration argument", "launch_configuration"),
)


# What torch says when a process that sees no GPU asks for one: a CUDA build of torch without a visible device,
# or a CPU build.
NO_GPU = (
    "no CUDA-capable device is detected",
    "No CUDA GPUs are available",
    "Found no NVIDIA driver",
    "Torch not compiled with CUDA enabled",
    "requires CUDA support",
)


def says_no_gpu(message: str) -> bool:
    """Whether an error message is torch finding no GPU (not a fault of the code that asked for one)."""
    return any(needle in message for needle in NO_GPU)


def fault_kind(message: str) -> str:
    """The fault kind a CUDA error message names, '' for anything else."""
    lowered = message.lower()
    return next((kind for needle, kind in CUDA_FAULTS if needle in lowered), "")


def signal_name(returncode: int) -> str:
    """'SIGSEGV' for a process killed by signal 11 (returncode -11), '' otherwise."""
    if returncode >= 0:
        return ""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"
