"""A KernelBench-style Python problem: a reference Model with get_inputs and get_init_inputs, and a candidate
ModelNew whose kernels load_inline builds, in one file or with the reference apart.

A published problem (Model, get_inputs, get_init_inputs and no ModelNew) is
taken too: its reference runs (`target: reference`), the kernels PyTorch
launches for it. Built by importing the module in a compile worker (its
load_inline calls go to the trusted builder); profiled by the harness, which
runs one measured call inside its NVTX range.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from profsvc.build.python_problem import HarnessStatus, compile_result, harness_argv, source_map
from profsvc.kinds.base import Built, KindContext, RunTarget, Verb, defined_names
from profsvc.metrics.nvtx import MEASURED_INCLUDE
from profsvc.scheduler.jobs import SourceSpec
from profsvc_contract.errors import InvalidRequest, Reason
from profsvc_contract.models import SourceKind, Target

REFERENCE_NAMES = ("Model", "get_inputs", "get_init_inputs")
CANDIDATE_NAMES = ("ModelNew",)
PROBLEM_NAMES = frozenset((*REFERENCE_NAMES, *CANDIDATE_NAMES))
STATUS_NAME = "compile-status.json"
PROFILE_STATUS = "profile-status.json"


def _missing(defined: set[str], needed: tuple[str, ...], name: str) -> InvalidRequest | None:
    absent = [n for n in needed if n not in defined]
    return InvalidRequest(f"{name} defines no {', '.join(absent)}", Reason.MISSING_SYMBOL) if absent else None


def _target(source: SourceSpec) -> Target:
    """The model that runs (validation resolved it; a source made elsewhere runs its candidate)."""
    return source.target if source.target != Target.UNSPECIFIED else Target.CANDIDATE


class PythonProblem:
    """See the module's text."""

    kind = SourceKind.PYTHON_PROBLEM
    verbs = frozenset(Verb)

    def claims(self, file_name: str, text: str) -> bool:
        """A .py that defines any of the problem's names at module level."""
        if not file_name.endswith(".py"):
            return False
        return bool(defined_names(text, file_name) & PROBLEM_NAMES)

    def validate(self, source: SourceSpec, verb: Verb) -> SourceSpec:
        """The names each verb needs; the target (candidate where there is a ModelNew, else the reference)."""
        defined = defined_names(source.main_text, source.main_name)
        if source.reference_text:
            reference_defined = defined_names(source.reference_text, source.reference_name)
        else:
            reference_defined = defined
        if verb == Verb.LINT:
            return source
        reference = source.reference_name or source.main_name
        error = _missing(reference_defined, REFERENCE_NAMES, reference)
        has_candidate = "ModelNew" in defined
        target = source.target
        if target == Target.UNSPECIFIED:
            target = Target.CANDIDATE if has_candidate else Target.REFERENCE
        needs_candidate = verb in (Verb.CHECK, Verb.EVALUATE) or target == Target.CANDIDATE
        if needs_candidate and not has_candidate:
            # Named alone first where the reference's names are missing too: the message lists them all.
            wanted = (*REFERENCE_NAMES, *CANDIDATE_NAMES) if error is not None else CANDIDATE_NAMES
            error = _missing(
                defined | (reference_defined if source.reference_text else set()), wanted, source.main_name
            )
        if error is not None:
            raise error
        return dataclasses.replace(source, target=target)

    async def build(self, context: KindContext, source: SourceSpec) -> Built:
        """Import the module in a compile worker (its load_inline calls build through the trusted builder)."""
        remembered = context.compiled.get(source)
        if remembered is not None:
            return Built(compile=remembered[0], status=remembered[1])
        start = time.monotonic()

        def argv(cell: Path) -> list[str]:
            main, reference = source.paths(cell)
            cache = context.cache_root
            command = harness_argv(context.config.python, main, reference, cache, cell / STATUS_NAME, "compile")
            return [*command, "--target", _target(source).value]

        # The import runs user code: bounded by the build timeout, but holding no build slot (the builds it asks
        # for take one each, in the builder).
        with context.telemetry.stage("compile"):
            async with context.cells.run(
                "compile",
                argv,
                files=source.files(),
                gpu=None,
                timeout=context.config.limits.compile_timeout_s,
                readonly=[context.cache_root],
            ) as (process, cell):
                status = HarnessStatus.read(
                    cell / STATUS_NAME,
                    returncode=process.returncode,
                    timed_out=process.timed_out,
                    output=process.output,
                )
        result = compile_result(status, source.main_name, time.monotonic() - start)
        context.compiled.put(source, result, status)
        return Built(compile=result, status=status)

    def run_target(self, context: KindContext, source: SourceSpec, built: Built) -> RunTarget:
        """The harness in profile mode: one warm-up outside, one measured call inside its NVTX range, in the
        source's precision."""
        target = _target(source)

        def argv(cell: Path) -> list[str]:
            main, reference = source.paths(cell)
            status = cell / PROFILE_STATUS
            command = harness_argv(context.config.python, main, reference, context.cache_root, status, "profile")
            return [*command, "--target", target.value, "--precision", source.precision.value]

        builds = list(built.status.builds) if built.status is not None else []
        return RunTarget(
            argv=argv,
            files=source.files(),
            readonly=[context.cache_root],
            default_nvtx=[MEASURED_INCLUDE],
            status_name=PROFILE_STATUS,
            target=target.value,
            warm=True,
            locations=source_map(builds, source.main_name),
        )


KIND = PythonProblem()
