"""Build the ncu command line (pure: no process is started here)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from profsvc_contract.models import DEFAULT_CLOCK_CONTROL, ClockControl

# Ranges a program marks with NVTX: any push/pop range and any start/end range, of the default domain (ncu reads
# an include without `@` as the default domain's) and of any named one (`regex:` matches the domain part too).
ANY_NVTX_RANGE = ("regex:.+/", "regex:.+", "regex:.+@.+/", "regex:.+@.+")
_NVTX_USE = re.compile(
    r"\bnvtx(?:Range(?:Push|Start)|DomainRange(?:Push|Start))\w*\s*\(|nvtx3::scoped_range|NVTX3_FUNC_RANGE"
)


# Python's ways: NVIDIA's nvtx package (annotate, push_range, start_range) and torch.cuda.nvtx.
_PYTHON_NVTX_USE = re.compile(r"\bnvtx\.(?:annotate|push_range|start_range|range_push|range_start|range)\s*\(")


def marks_nvtx_ranges(cuda_source: str) -> bool:
    """True when a CUDA program's source marks NVTX ranges."""
    return bool(_NVTX_USE.search(cuda_source))


def marks_python_nvtx_ranges(python_source: str) -> bool:
    """True when a Python program's source marks NVTX ranges."""
    return bool(_PYTHON_NVTX_USE.search(python_source))


@dataclass(frozen=True)
class NcuOptions:
    """What to collect and which launches to profile."""

    collection_args: Sequence[str]
    export_path: Path
    nvtx_include: Sequence[str] = ()
    name_regex: str = ""
    launch_count: int = 0
    launch_skip: int = 0
    extra_args: Sequence[str] = field(default_factory=tuple)
    # ncu's --clock-control: `none` leaves the clocks as they are (the default: see the contract's
    # DEFAULT_CLOCK_CONTROL), `base` locks them to the GPU's base clocks while ncu profiles.
    clock_control: ClockControl = DEFAULT_CLOCK_CONTROL


def ncu_command(ncu: str, options: NcuOptions, target: Sequence[str]) -> list[str]:
    """The full argv: ncu, its options, then the target program and its arguments."""
    argv = [
        ncu,
        "--config-file",
        "off",
        "--clock-control",
        options.clock_control.value,
        "--cache-control",
        "all",
        "--replay-mode",
        "kernel",
        "--target-processes",
        "all",
    ]
    if options.nvtx_include:
        argv.append("--nvtx")
        for include in options.nvtx_include:
            argv += ["--nvtx-include", include]
    if options.name_regex:
        argv += ["--kernel-name", f"regex:{options.name_regex}"]
    if options.launch_skip:
        argv += ["--launch-skip", str(options.launch_skip)]
    if options.launch_count:
        argv += ["--launch-count", str(options.launch_count)]
    argv += [*options.collection_args, *options.extra_args]
    argv += ["--export", str(options.export_path), "--force-overwrite"]
    return argv + list(target)
