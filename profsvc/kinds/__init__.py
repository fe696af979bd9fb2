"""The input kinds profsvc takes, one module each, registered here (as profsvc.staticcheck's detectors are).

A further kind is one module providing profsvc.kinds.base.InputKind and one line
in KINDS. The order is the order of detection for a file whose kind the request
leaves unspecified: the first kind that claims it takes it.
"""

from __future__ import annotations

from profsvc.kinds import cuda_program, python_problem, python_program
from profsvc.kinds.base import PROGRAM_TARGET, Built, InputKind, KindContext, RunTarget, Verb
from profsvc_contract.errors import InvalidRequest, Reason
from profsvc_contract.models import SourceKind

KINDS: tuple[InputKind, ...] = (python_problem.KIND, cuda_program.KIND, python_program.KIND)


def kind_named(kind: SourceKind) -> InputKind:
    """The registered kind of that name."""
    for registered in KINDS:
        if registered.kind == kind:
            return registered
    raise InvalidRequest(f"this server takes no {kind.value} sources", Reason.BAD_SOURCE_KIND)


def kind_of(kind: SourceKind, file_name: str, text: str) -> InputKind:
    """The kind a request names, or the first that claims the file."""
    if kind != SourceKind.UNSPECIFIED:
        return kind_named(kind)
    for registered in KINDS:
        if registered.claims(file_name, text):
            return registered
    raise InvalidRequest(
        f"cannot tell what {file_name!r} is: name it .py (a Python problem or program) or .cu (a CUDA program)",
        Reason.BAD_SOURCE_KIND,
    )


__all__ = ["KINDS", "PROGRAM_TARGET", "Built", "InputKind", "KindContext", "RunTarget", "Verb", "kind_named", "kind_of"]
