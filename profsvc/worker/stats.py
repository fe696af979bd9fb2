"""Summary statistics of timings: median, spread, percentiles, bootstrap intervals (pure Python)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _interval(samples: list[float]) -> tuple[float, float]:
    tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
    return percentile(samples, tail), percentile(samples, 100.0 - tail)


def median_interval(values: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """95 % bootstrap confidence interval of the median."""
    rng = random.Random(seed)
    n = len(values)
    medians = [statistics.median(rng.choices(values, k=n)) for _ in range(BOOTSTRAP_RESAMPLES)]
    return _interval(medians)


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """95 % bootstrap interval of median(numerator) / median(denominator), resampling each side."""
    rng = random.Random(seed)
    ratios = [
        statistics.median(rng.choices(numerator, k=len(numerator)))
        / statistics.median(rng.choices(denominator, k=len(denominator)))
        for _ in range(BOOTSTRAP_RESAMPLES)
    ]
    return _interval(ratios)


def summarize(values_us: Sequence[float]) -> dict[str, float | int]:
    """The TimingStats fields for per-call times in microseconds."""
    if not values_us:
        return {"n": 0}
    low, high = median_interval(values_us)
    return {
        "median_us": statistics.median(values_us),
        "mean_us": statistics.fmean(values_us),
        "std_us": statistics.stdev(values_us) if len(values_us) > 1 else 0.0,
        "min_us": min(values_us),
        "p10_us": percentile(values_us, 10),
        "p90_us": percentile(values_us, 90),
        "n": len(values_us),
        "median_ci_low_us": low,
        "median_ci_high_us": high,
    }
