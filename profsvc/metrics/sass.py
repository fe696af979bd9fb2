"""The kernel's SASS with its executions per PC, and the catalog's SASS counts over it.

ncu's source counters (the SourceCounters section) store, per PC, how often
the instruction there was executed by warps (`inst_executed`) and by
predicated-on threads (`thread_inst_executed_true`); `IAction.sass_by_pc` gives
the instruction's text ("HFMA2.MMA R4, -RZ, RZ, 0.24, -1.89"). Opcode counters
(`smsp__sass_thread_inst_executed_op_hfma_pred_on`, `sass__inst_executed_per_opcode`)
cannot see operands: these can.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from profsvc.metrics.catalog import SassCount
from profsvc.metrics.hotspots import per_pc

WARP_METRIC = "inst_executed"
THREAD_METRIC = "thread_inst_executed_true"
# An optional guard predicate (@P0, @!UP1, @PT), then the opcode with its modifiers, then the operands.
_INSTRUCTION = re.compile(
    r"^\s*(?:@!?U?P\w+\s+)?(?P<opcode>[A-Z][A-Z0-9_]*)(?P<modifiers>(?:\.\w+)*)\s*(?P<operands>.*)$"
)


@dataclass(frozen=True)
class SassInstruction:
    """One PC: its opcode, modifiers and operands, and how often it ran."""

    opcode: str
    modifiers: tuple[str, ...]
    operands: tuple[str, ...]
    warp_executions: float
    thread_executions: float

    @property
    def sources(self) -> tuple[str, ...]:
        """The source operands: all but the destination."""
        return self.operands[1:]


def parse_instruction(text: str) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """(opcode, modifiers, operands) of one SASS line; None when it is not an instruction."""
    match = _INSTRUCTION.match(text.strip().rstrip(";").strip())
    if match is None:
        return None
    operands = tuple(part.strip() for part in match.group("operands").split(",") if part.strip())
    return match.group("opcode"), tuple(m for m in match.group("modifiers").split(".") if m), operands


def kernel_sass(action: Any) -> list[SassInstruction] | None:
    """Every executed PC of the kernel with its instruction; None when the report lacks the source counters."""
    warps, threads = per_pc(action, WARP_METRIC), per_pc(action, THREAD_METRIC)
    if warps is None or threads is None:
        return None
    instructions = []
    for pc, executed in warps.items():
        parsed = parse_instruction(action.sass_by_pc(pc) or "")
        if parsed is None:
            if executed:
                return None  # an executed PC without its instruction: the counts cannot be trusted to be complete
            continue
        opcode, modifiers, operands = parsed
        instructions.append(SassInstruction(opcode, modifiers, operands, executed, threads.get(pc, 0.0)))
    return instructions


def sass_count_value(instructions: Sequence[SassInstruction] | None, entry: SassCount) -> float | None:
    """The entry's weighted executions over the kernel's SASS; None without the source counters."""
    if instructions is None:
        return None
    total = 0.0
    for instruction in instructions:
        executions = instruction.thread_executions if entry.count == "thread" else instruction.warp_executions
        for match in entry.match:
            if match.matches(instruction.opcode, instruction.modifiers, instruction.sources):
                total += match.weight * executions
                break  # the first matching pattern counts the instruction, once
    return total
