"""Parse compiler output (g++, nvcc, ptxas, the linker) into located diagnostics.

`FileMap` turns a build file's line back into the user's own file and line
(for load_inline, the CUDA source sits inside a string of the user's .py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath

from profsvc_contract.models import Diagnostic, Severity

# g++ / clang:  file:line:col: error: message
_GCC = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
    r"(?P<sev>fatal error|error|warning|note):\s*(?P<msg>.*)$"
)
# nvcc front end:  file(line): error #20: message   (also "warning #..-D", "remark")
_NVCC = re.compile(
    r"^(?P<file>[^\s(][^(\n]*)\((?P<line>\d+)\):\s*(?P<sev>error|warning|remark)(?:\s*#[\w-]+)?:\s*(?P<msg>.*)$"
)
# ptxas / nvlink / ld messages carry no location.
_TOOL = re.compile(
    r"^(?P<tool>ptxas|nvlink|ld|/usr/bin/ld|collect2)(?: fatal)?\s*(?:error|warning)?\s*:\s*(?P<msg>.*)$"
)
_UNDEFINED = re.compile(r"undefined reference to|undefined symbol|unresolved extern")

_SEVERITY = {
    "fatal error": Severity.ERROR,
    "error": Severity.ERROR,
    "warning": Severity.WARNING,
    "note": Severity.NOTE,
    "remark": Severity.NOTE,
}


@dataclass
class FileMap:
    """Maps build-file names (by base name) to the user's file and a line offset."""

    entries: dict[str, tuple[str, int]] = field(default_factory=dict)

    def add(self, build_name: str, user_file: str, line_offset: int) -> None:
        """Lines of `build_name` are the user's `user_file` lines shifted by `line_offset`."""
        self.entries[PurePath(build_name).name] = (user_file, line_offset)

    def locate(self, file: str, line: int) -> tuple[str, int]:
        """The user's file and line for a build file's line (unchanged when unmapped)."""
        mapped = self.entries.get(PurePath(file).name)
        if mapped is None:
            return PurePath(file).name, line
        user_file, offset = mapped
        return user_file, max(line + offset, 1) if line else 0


def parse_diagnostics(log: str, file_map: FileMap | None = None) -> list[Diagnostic]:
    """Every diagnostic in a build log, in order, without duplicates."""
    file_map = file_map or FileMap()
    found: list[Diagnostic] = []
    seen: set[tuple[str, int, int, str]] = set()
    for raw in log.splitlines():
        line = raw.strip()
        match = _GCC.match(line) or _NVCC.match(line)
        if match:
            file, lineno = file_map.locate(match["file"], int(match["line"]))
            column = int(match.groupdict().get("col") or 0)
            diagnostic = Diagnostic(
                file=file, line=lineno, column=column, severity=_SEVERITY[match["sev"]], message=match["msg"].strip()
            )
        elif (tool := _TOOL.match(line)) or _UNDEFINED.search(line):
            severity = Severity.WARNING if "warning" in line.split(":", 1)[0] else Severity.ERROR
            diagnostic = Diagnostic(file="", severity=severity, message=(tool["msg"] if tool else line).strip())
        else:
            continue
        key = (diagnostic.file, diagnostic.line, diagnostic.column, diagnostic.message)
        if key not in seen:
            seen.add(key)
            found.append(diagnostic)
    return found
