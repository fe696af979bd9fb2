"""A candidate's syntax tree, parsed without Python's warnings about its text.

Invalid escape sequences in CUDA strings are the candidate's business, not a reason to warn. Silencing them
changes process-wide state (`warnings.catch_warnings`), and checks run in threads beside each other: two
interleaved saves and restores left an `ignore` for every warning in the process. One lock keeps each
parse's save and restore together.
"""

from __future__ import annotations

import ast
import threading
import warnings

_QUIET = threading.Lock()


def parse_quietly(text: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, its SyntaxWarnings (and any other warnings) not shown; its errors raised as they are."""
    with _QUIET, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, filename=filename)
