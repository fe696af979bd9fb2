"""NVTX ranges in a report: the ranges each launch ran under, and profsvc's own.

The harness marks its measured call, and a warm profiling worker its own
warm-up kernel, in an NVTX domain of profsvc's own (ncu selects them as
`DOMAIN@RANGE/`). ncu reads a range without `@` as one of the default domain,
so a user's range of the same name, in the default domain or any other, is never
taken for the harness's. Imported by the harness: nothing heavy here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# The domain the harness's ranges are in.
PROFSVC_DOMAIN = "profsvc"
# The push/pop range around the measured call.
MEASURED_RANGE = "profsvc"
# A warm profiling worker profiles one kernel of its own in this push/pop range before its job, paying ncu's
# one-time set-up there (profsvc.scheduler.warm_pool); its report holds that kernel too, and the analysis leaves it out.
PROFILER_WARMUP_RANGE = "profsvc-warmup"
# ncu's --nvtx-include for each.
MEASURED_INCLUDE = f"{PROFSVC_DOMAIN}@{MEASURED_RANGE}/"
WARMUP_INCLUDE = f"{PROFSVC_DOMAIN}@{PROFILER_WARMUP_RANGE}/"
# How ncu_report names the domain of ranges opened without one.
_DEFAULT_DOMAIN_NAMES = ("", "<default domain>")


class DomainRanges(NamedTuple):
    """The ranges of one domain open at a launch ("" is the default domain)."""

    domain: str
    push_pop: list[str]  # the stack, outermost first
    start_end: list[str]


def domain_ranges(action: Any) -> list[DomainRanges]:
    """The NVTX ranges the launch (an ncu_report IAction) ran under, one entry per domain that had any."""
    state = action.nvtx_state()
    if state is None:
        return []
    found: list[DomainRanges] = []
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        # By index: the index is the range's place on the call stack (the names alone come sorted).
        push_pop = [domain.push_pop_range(i).name() for i in range(len(domain.push_pop_ranges()))]
        start_end = list(domain.start_end_ranges())
        if push_pop or start_end:
            name = domain.name()
            found.append(DomainRanges("" if name in _DEFAULT_DOMAIN_NAMES else name, push_pop, start_end))
    return found


def in_profsvc_range(action: Any, name: str) -> bool:
    """True when the launch ran inside profsvc's own push/pop range of that name (profsvc's domain, any depth)."""
    return any(r.domain == PROFSVC_DOMAIN and name in r.push_pop for r in domain_ranges(action))
