"""Pure pieces of the agent's tools: statistics, shape jitter, trial seeds, work left running."""

from __future__ import annotations

import math
import statistics

import pytest

from profsvc.worker.correctness import trial_seed
from profsvc.worker.shapes import ShapeJitter
from profsvc.worker.stats import median_interval, percentile, ratio_interval, summarize
from profsvc.worker.timing import left_running


def test_summary_statistics():
    values = [10.0, 11.0, 12.0, 13.0, 100.0]
    stats = summarize(values)
    assert stats["median_us"] == 12.0
    assert stats["mean_us"] == statistics.fmean(values)
    assert stats["min_us"] == 10.0 and stats["n"] == 5
    assert stats["p10_us"] == percentile(values, 10) == 10.4
    assert stats["median_ci_low_us"] <= stats["median_us"] <= stats["median_ci_high_us"]


def test_intervals_cover_the_point_estimate_and_shrink_with_more_data():
    few = [float(v) for v in (9, 10, 11, 12, 10, 11)]
    many = few * 50
    low_few, high_few = median_interval(few)
    low_many, high_many = median_interval(many)
    assert low_few <= statistics.median(few) <= high_few
    assert high_many - low_many <= high_few - low_few
    low, high = ratio_interval([20.0] * 10, [10.0] * 10)
    assert low == high == 2.0


def test_intervals_match_the_median_s_asymptotic_spread():
    # A sample that is a normal distribution's quantiles: the median's standard error is sqrt(pi/2) sigma / sqrt(n)
    # (the median's asymptotic variance, 1 / (4 n f(m)^2), with f(m) = 1 / (sigma sqrt(2 pi))).
    n, sigma = 400, 10.0
    normal = statistics.NormalDist(100.0, sigma)
    values = [normal.inv_cdf((i + 0.5) / n) for i in range(n)]
    error = math.sqrt(math.pi / 2) * sigma / math.sqrt(n)
    low, high = median_interval(values)
    assert high - low == pytest.approx(2 * 1.96 * error, rel=0.15)
    # The ratio of two independent medians, 200 and 100: relative errors add in quadrature.
    low, high = ratio_interval([2 * v for v in values], values)
    relative = math.hypot(2 * error / 200.0, error / 100.0)
    assert (high - low) / 2 == pytest.approx(1.96 * 2.0 * relative, rel=0.15)
    assert low < 2.0 < high


def test_trial_seeds_are_distinct_and_depend_on_the_secret():
    seeds = {trial_seed(1234, t) for t in range(100)}
    assert len(seeds) == 100
    assert trial_seed(1234, 0) != trial_seed(4321, 0)


def test_shape_jitter_is_nominal_then_deterministic_and_aligned():
    jitter = ShapeJitter()
    assert jitter.jitter_int(1024, align=8) == 1024
    jitter.trial(7)
    first = [jitter.jitter_int(1024, align=8) for _ in range(20)]
    jitter.trial(7)
    assert [jitter.jitter_int(1024, align=8) for _ in range(20)] == first
    assert all(v % 8 == 0 and 768 <= v <= 1280 for v in first)
    assert len(set(first)) > 1
    jitter.nominal()
    assert jitter.jitter_int(12) == 12


class _Record:
    """A CUPTI kernel record as kineto gives it: launch order, stream, GPU start and duration in ns."""

    def __init__(self, correlation: int, stream: int, start: int, duration: int) -> None:
        self._values = (correlation, stream, start, duration)

    def correlation_id(self) -> int:
        return self._values[0]

    def device_resource_id(self) -> int:
        return self._values[1]

    def start_ns(self) -> int:
        return self._values[2]

    def duration_ns(self) -> int:
        return self._values[3]


# The marker: launched as call 10 on stream 7, started at t = 100 us.
MARKER = _Record(10, 7, 100_000, 1_000)


@pytest.mark.parametrize(
    ("kernel", "left"),
    [
        # On the marker's own stream: stream order holds it before the marker, whatever CUPTI's stamps say.
        (_Record(3, 7, 50_000, 60_000), False),
        # On another stream, over before the marker started (a joined stream, or one it waited for).
        (_Record(3, 9, 50_000, 40_000), False),
        # On another stream, ending 0.5 us after the marker's start: within CUPTI's overlap of adjacent records.
        (_Record(3, 9, 60_000, 40_500), False),
        # On another stream, still running 50 us after the marker started: left running.
        (_Record(3, 9, 60_000, 90_000), True),
        # Launched after the marker (another thread, once the call had returned): left running wherever it ran.
        (_Record(11, 7, 120_000, 1_000), True),
    ],
)
def test_a_kernel_counts_as_left_running_only_past_the_marker_on_a_stream_of_its_own(kernel, left):
    assert left_running(kernel, MARKER) is left


def test_a_marker_without_a_timestamp_proves_nothing():
    assert not left_running(_Record(3, 9, 60_000, 90_000), _Record(10, 7, 0, 0))
