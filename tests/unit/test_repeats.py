"""Statistics over repeated profiles: each figure's median, min, max, spread and n, worked out by hand."""

from __future__ import annotations

import json

import pytest

from profsvc_client import cli
from profsvc_client.client import ProfilerClient, load_source
from profsvc_client.render import repeat_markdown, repeat_text
from profsvc_client.repeats import aggregate_repeats, figure_stats, numbered_progress
from profsvc_contract import errors
from profsvc_contract.document import dumps, read_document, result_document
from profsvc_contract.models import (
    ArtifactRef,
    FigureValue,
    JobError,
    KernelResult,
    NcuRun,
    ProfileResult,
    Progress,
    RepeatResult,
)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # median 3 of (2, 3, 4); spread (4 - 2) / 3 = 66.67 %.
        ([2.0, 4.0, 3.0], (3, 3.0, 2.0, 4.0, 200 / 3)),
        # An even count: the median is the mean of the middle two, (20 + 30) / 2; spread 30 / 25 = 120 %.
        ([40.0, 10.0, 30.0, 20.0], (4, 25.0, 10.0, 40.0, 120.0)),
        # A repeat without a value is left out: median of (5, 7) is 6; spread 2 / 6 = 33.33 %.
        ([None, 5.0, 7.0], (2, 6.0, 5.0, 7.0, 100 / 3)),
        # Every value the same: no spread, even at zero.
        ([0.0, 0.0, 0.0], (3, 0.0, 0.0, 0.0, 0.0)),
        # Values that differ around a median of zero: a spread relative to it is undefined.
        ([-1.0, 0.0, 1.0], (3, 0.0, -1.0, 1.0, None)),
        # A negative median: the spread is relative to its size, (-2 - -6) / 4 = 100 %.
        ([-6.0, -4.0, -2.0], (3, -4.0, -6.0, -2.0, 100.0)),
        ([None, None], (0, None, None, None, None)),
    ],
)
def test_figure_statistics(values, expected):
    stats = figure_stats(values, "ns")
    n, median, least, greatest, spread = expected
    assert (stats.n, stats.median, stats.min, stats.max) == (n, median, least, greatest)
    assert stats.spread_pct == (pytest.approx(spread) if spread is not None else None)
    assert stats.values == values and stats.unit == "ns"


def _kernel(name: str, index: int, duration: float | None, **metrics: float) -> KernelResult:
    return KernelResult(
        name=name,
        launch_index=index,
        figures={"duration": FigureValue(value=duration, unit="ns"), "occupancy": FigureValue(value=50.0, unit="%")},
        metrics={name: FigureValue(value=value, unit="byte") for name, value in metrics.items()},
    )


def _run(*kernels: KernelResult) -> ProfileResult:
    return ProfileResult(ok=True, kernels=list(kernels), ncu=NcuRun(version="2025.3.1.0", metric_set="default"))


FAILED = ProfileResult(ok=False, error=JobError(kind="timeout", message="the job ran past its limit"))


def test_launches_match_by_name_and_their_place_among_that_names_launches():
    # Repeat 1 launched gemm's second call before relu; repeat 2 failed; repeat 3 never launched relu.
    runs = [
        _run(_kernel("gemm", 0, 1000.0, dram__bytes_read=10.0), _kernel("relu", 1, 50.0), _kernel("gemm", 2, 2000.0)),
        _run(_kernel("gemm", 0, 1200.0, dram__bytes_read=30.0), _kernel("gemm", 1, 2600.0), _kernel("relu", 2, 70.0)),
        FAILED,
        _run(_kernel("gemm", 0, 1100.0), _kernel("gemm", 1, 2200.0)),
    ]
    result = aggregate_repeats(runs)
    assert (result.ok, result.repeats, result.runs) == (False, 4, runs)
    assert [(k.name, k.occurrence, k.launch_index, k.repeats) for k in result.kernels] == [
        ("gemm", 0, 0, 3),
        ("relu", 0, 1, 2),
        ("gemm", 1, 2, 3),
    ]
    first, relu, second = result.kernels
    # The first gemm: 1000, 1200, (failed), 1100: median 1100, spread 200 / 1100.
    duration = first.figures["duration"]
    assert duration.values == [1000.0, 1200.0, None, 1100.0]
    assert (duration.n, duration.median, duration.min, duration.max) == (3, 1100.0, 1000.0, 1200.0)
    assert duration.spread_pct == pytest.approx(100 * 200 / 1100)
    # The second gemm, wherever it came in launch order: 2000, 2600, 2200.
    assert second.figures["duration"].values == [2000.0, 2600.0, None, 2200.0]
    assert second.figures["duration"].median == 2200.0
    assert relu.figures["duration"].values == [50.0, 70.0, None, None] and relu.figures["duration"].median == 60.0
    # A requested metric, from the repeats that asked for it: 10 and 30 bytes.
    read = first.metrics["dram__bytes_read"]
    assert (read.unit, read.n, read.median, read.spread_pct) == ("byte", 2, 20.0, 100.0)
    assert first.figures["occupancy"].spread_pct == 0.0
    assert result.warnings == ["repeat 2 failed (timeout): the job ran past its limit", "relu ran in 2 of 3 repeats"]


def test_the_text_and_markdown_show_each_launchs_table():
    result = aggregate_repeats([_run(_kernel("gemm", 0, v)) for v in (2000.0, 4000.0, 3000.0)])
    text = repeat_text(result)
    assert text.startswith("=== profsvc repeated profile ===\n3 repeats, 3 ok: each repeat is a full ncu run")
    assert "ncu 2025.3.1.0, metric set default\n" in text
    assert "gemm (launch 0), in 3 of 3 repeats\n" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("duration"))
    assert row.split() == ["duration", "3", "μs", "2", "μs", "4", "μs", "66.7", "%", "3"]
    markdown = repeat_markdown(result)
    assert "| `duration` | 3 μs | 2 μs | 4 μs | 66.7 % | 3 |" in markdown
    assert "| `occupancy` | 50.0 % | 50.0 % | 50.0 % | 0.0 % | 3 |" in markdown


def test_the_document_carries_the_statistics_and_reads_back():
    result = aggregate_repeats([_run(_kernel("gemm", 0, 1.0)), FAILED])
    text = dumps(result_document(result))
    document = json.loads(text)
    assert document["kernels"][0]["figures"]["duration"] == {
        "unit": "ns",
        "values": [1.0, None],
        "n": 1,
        "median": 1.0,
        "min": 1.0,
        "max": 1.0,
        "spread_pct": 0.0,
    }
    assert read_document(text, RepeatResult) == result


def test_progress_says_which_repeat_it_belongs_to():
    seen: list[Progress] = []
    numbered_progress(seen.append, 1, 3)(Progress(message="kernel 0 gemm: 50%"))
    assert [event.message for event in seen] == ["repeat 2/3: kernel 0 gemm: 50%"]


class _Repeating(ProfilerClient):
    """A client whose profiles are given, one per call (no server: the statistics are the client's)."""

    def __init__(self, results: list[ProfileResult]) -> None:
        super().__init__("127.0.0.1:1")
        self.results = iter(results)
        self.asked: list[dict] = []

    def profile(self, source, **options):
        self.asked.append(options)
        return next(self.results)

    def download_artifact(self, artifact_id, destination):
        path = destination / f"{artifact_id}.ncu-rep"
        path.write_text(artifact_id)
        return path


def test_the_client_repeats_the_same_request():
    runs = [_run(_kernel("gemm", 0, v)) for v in (1.0, 3.0)]
    with _Repeating(runs) as client:
        result = client.profile_repeated(load_source(__file__), repeats=2, metric_set="full", session_id="s")
        assert result.repeats == 2 and result.kernels[0].figures["duration"].median == 2.0
        assert [options["metric_set"] for options in client.asked] == ["full", "full"]
        with pytest.raises(errors.InvalidRequest, match="repeats must be at least 1, not 0"):
            client.profile_repeated(load_source(__file__), repeats=0)


@pytest.mark.parametrize("form", ["text", "json", "md"])
def test_profile_repeat_prints_the_statistics_and_saves_each_repeats_files(tmp_path, monkeypatch, capsys, form):
    runs = [
        _run(_kernel("gemm", 0, v)).model_copy(update={"artifacts": [ArtifactRef(id=f"job{i}")]})
        for i, v in enumerate((2000.0, 4000.0, 3000.0))
    ]
    client = _Repeating(runs)
    problem = tmp_path / "problem.py"
    problem.write_text("# a problem\n")
    out = tmp_path / "out"
    argv = ["profile", str(problem), "--repeat", "3", "--format", form, "--out", str(out)]
    args = cli.build_parser().parse_args(argv)
    args.program_args = []
    assert cli._profile(client, args) == 0
    printed = capsys.readouterr().out
    expected = aggregate_repeats(runs)
    assert printed == {"text": repeat_text, "md": repeat_markdown}.get(form, lambda r: dumps(result_document(r)))(
        expected
    )
    assert read_document((out / "result.json").read_text(), RepeatResult) == expected
    assert (out / "report.txt").read_text() == repeat_text(expected)
    assert [(out / f"repeat-{i}" / f"job{i}.ncu-rep").read_text() for i in range(3)] == ["job0", "job1", "job2"]


def test_a_repeat_count_below_one_is_one_line_before_any_server(tmp_path, capsys):
    code = cli.main(["profile", str(tmp_path / "absent.py"), "--repeat", "0", "--server", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2 and err == "profsvc: error: --repeat must be at least 1, not 0 [BAD_ARGUMENT]\n"
