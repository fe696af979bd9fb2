"""The kernel filter's name pattern, matched by RE2: time linear in the name, whatever the pattern.

The caller writes the pattern and, for an uploaded report, the kernel names too. Python's backtracking
engine took exponential time on a pattern such as `(.*.*.*)*Z`: one such Analyze held a reader, and one of
the server's reading slots, to the reading time limit (300 s). RE2 (Google's, as `google-re2`) has no
backreferences or lookaround; ncu's `--kernel-name regex:` takes the same pattern, so a Profile's filter is
held to the same syntax.
"""

from __future__ import annotations

import functools
from typing import Any


class NamePatternError(ValueError):
    """The pattern is not one RE2 compiles (its syntax, a construct RE2 lacks, or its size)."""


@functools.cache
def _re2() -> tuple[Any, Any]:
    # Imported at the first filter, not with this module: a report reader loads ncu_report first, which fails
    # where some native libraries (grpc's, matplotlib's) came before it.
    import re2

    options = re2.Options()
    # A bad pattern is the caller's error, answered as such: not a line in the server's log.
    options.log_errors = False
    return re2, options


def name_pattern(pattern: str) -> Any:
    """The compiled pattern (its `search(name)` as `re`'s); NamePatternError with RE2's reason."""
    re2, options = _re2()
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else "not a pattern RE2 compiles"
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise NamePatternError(f"{text} (patterns are RE2 syntax: no backreferences or lookaround)") from None
