"""NVTX ranges in a report: which launch was inside which push/pop range."""

from __future__ import annotations

from typing import Any

# A warm profiling worker profiles one kernel of its own in this push/pop range before its job, paying ncu's
# one-time set-up there (profsvc.scheduler.standby); its report holds that kernel too, and the analysis leaves it out.
PROFILER_WARMUP_RANGE = "profsvc-warmup"


def in_push_pop_range(action: Any, name: str) -> bool:
    """True when the launch (an ncu_report IAction) was inside an NVTX push/pop range of that name (any domain,
    any depth).

    Read through the action's NVTX state, which is safe whatever was imported before ncu_report.
    """
    state = action.nvtx_state()
    if state is None:
        return False
    return any(name in state.domain_by_id(domain).push_pop_ranges() for domain in state.domains())
