"""A plain Python program, run as `python PROGRAM ARGS...` under ncu, as one would run `ncu python prog.py`.

Anything a program does on the GPU is fair: torch operations, Triton kernels,
extensions it builds (its load_inline calls build through the trusted builder
like a problem's). Profiled: the kernels inside the NVTX ranges it marks
(`nvtx.annotate`, `torch.cuda.nvtx.range_push`, ...), or, where it marks none,
the launches the request's `--kernel` and `--launch-count` select.
"""

from __future__ import annotations

from pathlib import Path

from profsvc.build.python_problem import HarnessStatus
from profsvc.kinds.base import PROGRAM_TARGET, Built, KindContext, RunTarget, Verb, parse_python, refuse_verb
from profsvc.ncu.command import ANY_NVTX_RANGE, marks_python_nvtx_ranges
from profsvc.scheduler.jobs import SourceSpec
from profsvc_contract.models import CompileResult, SourceKind

PROGRAM_MODULE = "profsvc.worker.program"
STATUS_NAME = "program-status.json"


class PythonProgram:
    """See the module's text."""

    kind = SourceKind.PYTHON_PROGRAM
    verbs = frozenset({Verb.COMPILE, Verb.PROFILE})

    def claims(self, file_name: str, text: str) -> bool:
        """Any .py that is not a problem (the registry asks the problem first)."""
        return file_name.endswith(".py")

    def validate(self, source: SourceSpec, verb: Verb) -> SourceSpec:
        """Python that parses; only compile and profile."""
        if verb not in self.verbs:
            raise refuse_verb("Python program", verb, source.main_name, "use profile (or a Python problem)")
        parse_python(source.main_text, source.main_name)
        return source

    async def build(self, context: KindContext, source: SourceSpec) -> Built:
        """Nothing to build ahead: a program builds what it needs as it runs (its syntax was checked)."""
        return Built(compile=CompileResult(ok=True), status=HarnessStatus(ok=True, stage="compiling"))

    def run_target(self, context: KindContext, source: SourceSpec, built: Built) -> RunTarget:
        """The program through profsvc's launcher (the build wrapper installed, then the program as __main__)."""

        def argv(cell: Path) -> list[str]:
            command = [context.config.python, "-m", PROGRAM_MODULE, "--status", str(cell / STATUS_NAME)]
            command += ["--cache", str(context.cache_root), "--", str(cell / source.main_name)]
            return [*command, *source.args]

        marked = marks_python_nvtx_ranges(source.main_text)
        return RunTarget(
            argv=argv,
            files={source.main_name: source.main_text},
            readonly=[context.cache_root],
            default_nvtx=list(ANY_NVTX_RANGE) if marked else [],
            status_name=STATUS_NAME,
            target=PROGRAM_TARGET,
        )


KIND = PythonProgram()
