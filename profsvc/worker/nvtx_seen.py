"""The NVTX ranges a program opens, seen through Python's entry points (NVIDIA's nvtx, torch.cuda.nvtx).

When ncu profiles nothing, this tells a program that never reached an NVTX range from one that reached its
ranges and launched nothing there that matched. Ranges opened from C or C++ (an extension's own
nvtxRangePushA) are not seen: a count of 0 says no Python entry point opened one.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

# Distinct range names kept for the report (the count covers every opening).
KEPT_NAMES = 20


class RangesSeen:
    """What the program opened: how many ranges, and the first distinct `domain@name` labels."""

    def __init__(self) -> None:
        self.count = 0
        self.names: list[str] = []

    def add(self, name: object, domain: object) -> None:
        """Count one range opened (its name and domain as the program passed them)."""
        self.count += 1
        label = f"{domain}@{name}" if domain else str(name or "")
        if label not in self.names and len(self.names) < KEPT_NAMES:
            self.names.append(label)


def _nvtx_call(message: object = None, color: object = None, domain: object = None, *_: Any, **__: Any) -> tuple:
    return message, domain


def _torch_call(message: object = "", *_: Any, **__: Any) -> tuple:
    return message, None


def _wrap(module: Any, attribute: str, seen: RangesSeen, arguments: Callable[..., tuple]) -> None:
    original = getattr(module, attribute, None)
    if not callable(original):
        return

    @functools.wraps(original)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.add(*arguments(*args, **kwargs))
        return original(*args, **kwargs)

    setattr(module, attribute, recorded)


def _watch_annotate(nvtx: Any, seen: RangesSeen) -> None:
    base = nvtx.annotate

    class annotate(base):  # type: ignore[misc, valid-type]  (the name users import)
        """nvtx.annotate, counted when its range opens (as a context manager or a decorated call)."""

        def __init__(self, message: Any = None, color: Any = None, domain: Any = None, *args: Any, **kw: Any) -> None:
            super().__init__(message, color, domain, *args, **kw)
            self._seen_as = (message, domain)

        def __enter__(self) -> Any:
            seen.add(*self._seen_as)
            return super().__enter__()

        def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
            inner = super().__call__(func)
            message, domain = self._seen_as

            @functools.wraps(func)
            def counted(*args: Any, **kwargs: Any) -> Any:
                seen.add(message or func.__name__, domain)
                return inner(*args, **kwargs)

            return counted

    annotate.__doc__ = base.__doc__
    nvtx.annotate = annotate


def watch(seen: RangesSeen) -> None:
    """Count the ranges opened through the entry points of the modules this process can import, from now on
    (a program imports them after: it gets the counting ones)."""
    try:
        import nvtx
    except ImportError:
        nvtx = None
    if nvtx is not None:
        for attribute in ("push_range", "start_range"):
            _wrap(nvtx, attribute, seen, _nvtx_call)
        _watch_annotate(nvtx, seen)
    torch = sys.modules.get("torch")
    if torch is not None:
        # torch.cuda.nvtx.range() calls range_push through the module: counted too.
        for attribute in ("range_push", "range_start"):
            _wrap(torch.cuda.nvtx, attribute, seen, _torch_call)
