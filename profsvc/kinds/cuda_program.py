"""A standalone CUDA C++ program (`.cu` with `main()`), built with nvcc and run as it is.

Profiled: the kernels inside the NVTX ranges the program marks, or, where it
marks none, the launches the request's `--kernel` and `--launch-count` select.
"""

from __future__ import annotations

import re
from pathlib import Path

from profsvc.build.nvcc import build_cuda_program
from profsvc.kinds.base import PROGRAM_TARGET, Built, KindContext, RunTarget, Verb, refuse_verb
from profsvc.ncu.command import ANY_NVTX_RANGE, marks_nvtx_ranges
from profsvc.scheduler.jobs import SourceSpec
from profsvc_contract.errors import InvalidRequest, PreconditionFailed, Reason
from profsvc_contract.models import SourceKind

_MAIN = re.compile(r"\bint\s+main\s*\(")


class CudaProgram:
    """See the module's text."""

    kind = SourceKind.CUDA_PROGRAM
    verbs = frozenset({Verb.COMPILE, Verb.PROFILE})

    def claims(self, file_name: str, text: str) -> bool:
        """A .cu file."""
        return file_name.endswith(".cu")

    def validate(self, source: SourceSpec, verb: Verb) -> SourceSpec:
        """A main() to run; only compile and profile."""
        if verb not in self.verbs:
            raise refuse_verb("CUDA program", verb, source.main_name, "use profile (or a Python problem)")
        if not _MAIN.search(source.main_text):
            raise InvalidRequest(
                f"{source.main_name} has no `int main(`: a .cu program needs one", Reason.MISSING_SYMBOL
            )
        return source

    async def build(self, context: KindContext, source: SourceSpec) -> Built:
        """nvcc in a cell, through the verified cache."""
        if not context.host.nvcc_path:
            raise PreconditionFailed("cannot build CUDA code: nvcc is not installed on this server", Reason.NO_NVCC)
        async with context.compile_slots:
            with context.telemetry.stage("compile"):
                build = await build_cuda_program(
                    source=source.main_text,
                    file_name=source.main_name,
                    flags=list(source.nvcc_flags),
                    arch=context.arch,
                    nvcc=context.host.nvcc_path,
                    nvcc_version=context.host.nvcc_version,
                    index=context.index,
                    cells=context.cells,
                    timeout=context.config.limits.compile_timeout_s,
                )
        ok = build.result.ok and build.binary is not None
        result = build.result if ok else build.result.model_copy(update={"ok": False})
        return Built(compile=result, program=build.binary, compiled_in=build.compiled_in)

    def run_target(self, context: KindContext, source: SourceSpec, built: Built) -> RunTarget:
        """The program itself, from the cache (read-only), with its arguments."""
        program = built.program
        assert program is not None
        marked = marks_nvtx_ranges(source.main_text)
        return RunTarget(
            argv=lambda cell: [str(program), *source.args],
            files={},
            readonly=[program.parent],
            default_nvtx=list(ANY_NVTX_RANGE) if marked else [],
            target=PROGRAM_TARGET,
            # nvcc compiled it in a cell of its own: its lines are reported under the user's file name.
            locations={str(Path(built.compiled_in) / source.main_name): (source.main_name, 0)},
        )


KIND = CudaProgram()
