"""Source-line hotspots: where a kernel's PC samples fall in its CUDA source.

ncu samples warp states at intervals (`smsp__pcsamp_sample_count` and one
`smsp__pcsamp_warps_issue_stalled_<reason>` counter per state, instanced per
PC: their correlation ids are the PCs). A kernel built with -lineinfo maps each
PC to a file and line (`IAction.source_info`), and a report made with
`--import-source yes` embeds the files (`IAction.source_files`). This module
adds the samples up per line, names each line's top stall, and counts the
line's global memory instructions from the source counters (`inst_executed` at
PCs that have `memory_l2_theoretical_sectors_global`, and that metric minus its
`_ideal` as excess sectors).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from profsvc_contract.models import SourceHotspot

TOP_HOTSPOTS = 10
SAMPLES_METRIC = "smsp__pcsamp_sample_count"
EXECUTED_METRIC = "inst_executed"
SECTORS_METRIC = "memory_l2_theoretical_sectors_global"
IDEAL_SECTORS_METRIC = "memory_l2_theoretical_sectors_global_ideal"
# All samples, not the `_not_issued` variants (those count only cycles without an issue).
_STALL_METRIC = re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+)$")
# `selected` is the state of the warp being issued, not a stall.
_NOT_A_STALL = frozenset({"selected"})

Location = tuple[str, int]


@dataclass(frozen=True)
class PcCounters:
    """What ncu measured at one PC: samples per warp state and global memory source counters.

    `global_instructions` and `excess_sectors` are 0 at PCs that are not global
    memory instructions, and None when the report lacks the source counters.
    """

    samples: int = 0
    stalls: Mapping[str, int] = field(default_factory=dict)
    global_instructions: float | None = None
    excess_sectors: float | None = None


@dataclass
class _Line:
    samples: int = 0
    stalls: Counter[str] = field(default_factory=Counter)
    global_instructions: float | None = None
    excess_sectors: float | None = None


def _add(total: float | None, value: float | None) -> float | None:
    if value is None:
        return total
    return value if total is None else total + value


def aggregate_hotspots(
    pcs: Mapping[int, PcCounters],
    locate: Callable[[int], Location | None],
    line_text: Callable[[str, int], str],
    top: int = TOP_HOTSPOTS,
) -> list[SourceHotspot]:
    """The `top` source lines with the most samples, each with its share of all samples (PCs without a line too)."""
    total = sum(counters.samples for counters in pcs.values())
    lines: dict[Location, _Line] = {}
    for pc, counters in pcs.items():
        where = locate(pc)
        if where is None:
            continue
        line = lines.setdefault(where, _Line())
        line.samples += counters.samples
        line.stalls.update(counters.stalls)
        line.global_instructions = _add(line.global_instructions, counters.global_instructions)
        line.excess_sectors = _add(line.excess_sectors, counters.excess_sectors)
    ranked = sorted(
        (item for item in lines.items() if item[1].samples > 0), key=lambda item: (-item[1].samples, item[0])
    )
    hotspots = []
    for (file, number), line in ranked[:top]:
        stalls = [(count, reason) for reason, count in line.stalls.items() if reason not in _NOT_A_STALL and count > 0]
        # Most samples first; on a tie the alphabetically first reason, so the result is deterministic.
        count, reason = min(stalls, key=lambda pair: (-pair[0], pair[1])) if stalls else (0, "")
        hotspots.append(
            SourceHotspot(
                file=file,
                line=number,
                text=line_text(file, number),
                samples=line.samples,
                sample_share_pct=100.0 * line.samples / total,
                top_stall=reason,
                top_stall_share_pct=100.0 * count / line.samples,
                global_memory_instructions=line.global_instructions,
                excess_sectors=line.excess_sectors,
            )
        )
    return hotspots


def per_pc(action: Any, name: str) -> dict[int, float] | None:
    """An instanced metric as {correlation id: value}; None when the report lacks it."""
    metric = action.metric_by_name(name)
    if metric is None:
        return None
    ids = metric.correlation_ids()
    if ids is None:
        return None
    return {int(ids.value(i)): float(metric.value(i)) for i in range(metric.num_instances())}


def _global_memory(
    pc: int, executed: dict[int, float] | None, sectors: dict[int, float] | None, ideal: dict[int, float] | None
) -> tuple[float | None, float | None]:
    """(global memory instructions, excess L2 sectors) at one PC; None without the source counters."""
    if executed is None or sectors is None or ideal is None:
        return None, None
    if pc not in sectors:  # ncu gives the sector counts only at global memory instructions
        return 0.0, 0.0
    return executed.get(pc, 0.0), sectors[pc] - ideal.get(pc, sectors[pc])


def pc_counters(action: Any) -> dict[int, PcCounters]:
    """Every PC with samples or executed instructions, with what ncu measured there."""
    samples = per_pc(action, SAMPLES_METRIC) or {}
    stalls: dict[str, dict[int, float]] = {}
    for name in action.metric_names():
        match = _STALL_METRIC.match(name)
        if match and not name.endswith("_not_issued"):
            stalls[match.group(1)] = per_pc(action, name) or {}
    executed = per_pc(action, EXECUTED_METRIC)
    sectors = per_pc(action, SECTORS_METRIC)
    ideal = per_pc(action, IDEAL_SECTORS_METRIC)
    counters = {}
    for pc in samples.keys() | (executed or {}).keys():
        global_instructions, excess_sectors = _global_memory(pc, executed, sectors, ideal)
        counters[pc] = PcCounters(
            samples=int(samples.get(pc, 0)),
            stalls={reason: int(per_pc[pc]) for reason, per_pc in stalls.items() if pc in per_pc},
            global_instructions=global_instructions,
            excess_sectors=excess_sectors,
        )
    return counters


def _locate(action: Any, pc: int) -> Location | None:
    info = action.source_info(pc)
    if info is None or info.line() <= 0:
        return None
    return info.file_name(), info.line()


def source_line(files: Mapping[str, str], file: str, line: int) -> str:
    """The stripped text of a source line from the report's embedded files ("" when not embedded).

    The file is looked up by its name in the report, then by its base name.
    """
    content = files.get(file) or next(
        (text for name, text in files.items() if text and PurePath(name).name == PurePath(file).name), ""
    )
    rows = content.splitlines()
    return rows[line - 1].strip() if 0 < line <= len(rows) else ""


def source_hotspots(action: Any, top: int = TOP_HOTSPOTS) -> list[SourceHotspot]:
    """The kernel's `top` source lines by PC samples; empty without samples or without -lineinfo."""
    files = dict(action.source_files().items())
    return aggregate_hotspots(
        pc_counters(action), lambda pc: _locate(action, pc), lambda file, line: source_line(files, file, line), top
    )


def lacks_line_info(action: Any) -> bool:
    """True when ncu sampled PCs but none maps to a source line: the kernel was built without -lineinfo."""
    samples = per_pc(action, SAMPLES_METRIC)
    return bool(samples) and all(_locate(action, pc) is None for pc in samples)


def relocate(hotspots: list[SourceHotspot], source_map: Mapping[str, tuple[str, int]]) -> list[SourceHotspot]:
    """Hotspots in generated files moved into the user's own file.

    `source_map` maps a generated file's path (load_inline's cuda.cu in its build
    folder) to (the user's file name, the line offset of the source string there).
    """
    moved = []
    for hotspot in hotspots:
        target = source_map.get(hotspot.file)
        if target is None:
            moved.append(hotspot)
        else:
            user_file, offset = target
            moved.append(hotspot.model_copy(update={"file": user_file, "line": hotspot.line + offset}))
    return moved
