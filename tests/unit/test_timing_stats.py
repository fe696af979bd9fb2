"""Pure pieces of the agent's tools: statistics, shape jitter, trial seeds."""

from __future__ import annotations

import statistics

from profsvc.worker.correctness import trial_seed
from profsvc.worker.shapes import ShapeJitter
from profsvc.worker.stats import median_interval, percentile, ratio_interval, summarize


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
