"""`profsvc profile --repeat 3` on the seed: three full ncu runs and every figure's statistics over them."""

from __future__ import annotations

import math
import statistics

import pytest

from profsvc_contract.document import read_document
from profsvc_contract.models import RepeatResult
from tests.conftest import FIXTURES, run_cli

pytestmark = pytest.mark.gpu


def test_profile_repeat_three_times_on_the_seed(served, tmp_path):
    out = tmp_path / "out"
    done = run_cli(
        "profile", FIXTURES / "seed47.py", "--repeat", "3", "--format", "json", "--out", out, "--server", served
    )
    assert done.returncode == 0, done.stderr
    result = read_document(done.stdout, RepeatResult)
    assert result.ok and result.repeats == 3 and not result.warnings
    # Three profiles, each its own job and report, not one answer shown three times.
    assert len({run.job_id for run in result.runs}) == 3
    assert all((out / f"repeat-{i}" / "report.ncu-rep").is_file() for i in range(3))
    for kernel in result.kernels:
        assert kernel.repeats == 3
        duration = kernel.figures["duration"]
        assert duration.n == 3 and duration.unit == "ns"
        assert duration.spread_pct is not None and math.isfinite(duration.spread_pct) and duration.spread_pct >= 0
        # The statistics are those of the runs' own values.
        values = [run.kernels[kernel.launch_index].value("duration") for run in result.runs]
        assert duration.values == values and duration.median == statistics.median(values)
        assert (duration.min, duration.max) == (min(values), max(values))
    text = run_cli("profile", FIXTURES / "seed47.py", "--repeat", "3", "--server", served)
    assert text.returncode == 0, text.stderr
    assert "3 repeats, 3 ok: each repeat is a full ncu run" in text.stdout and "in 3 of 3 repeats" in text.stdout
