"""Shape jitter for problem files: the same problem at slightly different sizes each trial.

A problem's get_inputs() may call `p.jitter_int(n, align=8)` (the harness puts
`popcorn_pri` and `profsvc_shapes` into the problem module; `p = popcorn_pri`).
Trial 0 (and every timed or profiled call) uses the nominal sizes; later
correctness trials draw sizes near them, so a candidate that hard-codes one
shape fails with a message saying so.
"""

from __future__ import annotations

import random

# How far a jittered size may stray from the nominal one.
SPREAD = 0.25


class ShapeJitter:
    """Deterministic per-trial size jitter."""

    def __init__(self) -> None:
        self._rng: random.Random | None = None

    def nominal(self) -> None:
        """Sizes as written (trial 0, timing, profiling)."""
        self._rng = None

    def trial(self, seed: int) -> None:
        """Jittered sizes for a trial, from the trial's seed."""
        self._rng = random.Random(seed)

    def jitter_int(self, value: int, align: int = 1) -> int:
        """`value` itself, or during a jittered trial a nearby multiple of `align` (at least `align`)."""
        if self._rng is None or value <= align:
            return value
        low = max(align, int(value * (1 - SPREAD)))
        high = max(low, int(value * (1 + SPREAD)))
        drawn = self._rng.randint(low, high)
        return max(align, drawn - drawn % align)


JITTER = ShapeJitter()
