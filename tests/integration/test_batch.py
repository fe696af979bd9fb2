"""`profsvc batch`: problems in, one parquet out, resumable; several servers on one channel.

The real path runs against `profsvc serve` on loopback (without a GPU every problem fails, each
as its own row). The resume logic is tested with a fake per-problem call that interrupts the run,
because profiling needs a GPU: tests/gpu/test_batch_gpu.py kills and resumes a real batch there.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import profsvc_client
from profsvc_client.batch import (
    COLUMNS,
    Problem,
    ProgressBar,
    checkpoint_path,
    discover,
    read_checkpoint,
    read_results,
    run_batch,
)
from profsvc_client.client import ProfilerClient, multi_address_target, service_config
from profsvc_contract import errors
from profsvc_contract.models import Capabilities, FigureValue, KernelResult, NcuRun, ProfileResult, ServerInfo
from tests.conftest import FIXTURES, HAS_GPU, run_cli

ROOT = Path(__file__).parents[2]

NEEDS = "batch results need pandas and pyarrow (pip install './client[batch]')"
pd = pytest.importorskip("pandas", reason=NEEDS)
pq = pytest.importorskip("pyarrow.parquet", reason=NEEDS)

EXAMPLES = FIXTURES.parent.parent / "examples"
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the answer of a server without a GPU")


class FakeProfiler:
    """Stands in for the server: records each problem it is asked for; raises KeyboardInterrupt on call `stop_at`."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.calls: list[str] = []
        self.stop_at = stop_at

    def __call__(self, problem: Problem) -> ProfileResult:
        self.calls.append(problem.name)
        if len(self.calls) == self.stop_at:
            raise KeyboardInterrupt
        if problem.name == "p5.py":
            raise errors.InvalidRequest("p5.py defines no ModelNew", errors.Reason.MISSING_SYMBOL)
        figures = {
            "duration": FigureValue(value=1000.0 + len(problem.name), unit="ns"),
            "dram_throughput_pct": FigureValue(value=None, unit="%"),
        }
        # p2 launches two kernels: two rows.
        count = 2 if problem.name == "p2.py" else 1
        kernels = [KernelResult(name=f"k{i}", launch_index=i, figures=figures) for i in range(count)]
        return ProfileResult(ok=True, kernels=kernels)


@pytest.fixture
def six_problems(tmp_path):
    root = tmp_path / "problems"
    root.mkdir()
    for i in range(6):
        (root / f"p{i}.py").write_text(f"# problem {i}\n")
    return discover(root, metric_set="basic")


def test_resume_after_an_interruption(six_problems, tmp_path):
    out = tmp_path / "out" / "results.parquet"
    first = FakeProfiler(stop_at=4)
    with pytest.raises(KeyboardInterrupt):
        run_batch(six_problems, out, first, concurrency=1)
    checkpoint = checkpoint_path(out)
    assert checkpoint.name == "results.parquet.partial.jsonl"
    assert len(checkpoint.read_text().splitlines()) == 3 and not out.exists()
    assert len(read_results(checkpoint)) == 4  # p2 has two kernels: a run still going can be read too
    # A crash in the middle of a write leaves a line cut short: it is ignored, then trimmed.
    with checkpoint.open("a") as handle:
        handle.write('{"key": "cut sh')

    second = FakeProfiler()
    summary = run_batch(six_problems, out, second, concurrency=2)
    assert sorted(second.calls) == ["p3.py", "p4.py", "p5.py"]  # the three finished ones are not redone
    assert (summary.total, summary.resumed, summary.ok, summary.rows) == (6, 3, 5, 7)
    assert summary.failed == {"MISSING_SYMBOL": 1}
    assert "6 problems (3 from the checkpoint, 3 run): 5 ok, 1 failed (MISSING_SYMBOL 1)" in summary.line()
    lines = checkpoint.read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(line) for line in lines)

    frame = read_results(out)
    assert list(frame.columns) == [*COLUMNS, "dram_throughput_pct", "duration"]
    assert list(frame["problem"]) == ["p0.py", "p1.py", "p2.py", "p2.py", "p3.py", "p4.py", "p5.py"]
    assert frame["problem"].nunique() == 6
    assert str(frame["duration"].dtype) == "float64" and str(frame["dram_throughput_pct"].dtype) == "float64"
    assert str(frame["launch_index"].dtype) == "Int64" and str(frame["wall_seconds"].dtype) == "float64"
    assert frame.attrs["units"] == {"duration": "ns", "dram_throughput_pct": "%"}
    ok = frame[frame["status"] == "ok"]
    assert (ok["duration"] > 0).all() and ok["dram_throughput_pct"].isna().all()
    assert list(frame.loc[frame["problem"] == "p2.py", "kernel"]) == ["k0", "k1"]
    failed = frame[frame["problem"] == "p5.py"].iloc[0]
    assert failed["status"] == "MISSING_SYMBOL" and "ModelNew" in failed["error"]
    assert failed["kernel"] == "" and failed["launch_index"] is pd.NA and pd.isna(failed["duration"])
    assert set(frame["metric_set"]) == {"basic"} and set(frame["tags"]) == {"{}"}
    assert profsvc_client.read_results(out).equals(frame)

    # Everything is in the checkpoint: a third run profiles nothing and writes the same table.
    third = FakeProfiler()
    assert run_batch(six_problems, out, third).resumed == 6 and third.calls == []


def test_a_changed_file_is_profiled_again(six_problems, tmp_path):
    out = tmp_path / "results.parquet"
    run_batch(six_problems, out, FakeProfiler())
    six_problems[0].path.write_text("# problem 0, edited\n")
    again = FakeProfiler()
    run_batch(discover(six_problems[0].path.parent, metric_set="basic"), out, again)
    assert again.calls == ["p0.py"]
    rerun = FakeProfiler()
    run_batch(discover(six_problems[0].path.parent, metric_set="full"), out, rerun)
    assert len(rerun.calls) == 6  # another metric set is another measurement


def test_manifest(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.cu").write_text("int main() { return 0; }\n")
    (tmp_path / "two.py").write_text("# two\n")
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(
        '{"file": "a/one.cu", "kernel": "saxpy", "tags": {"level": "1"}}\n\n{"file": "two.py", "metric_set": "full"}\n'
    )
    one, two = discover(manifest, kernel_regex="default_re", metric_set="basic")
    assert (one.name, one.kernel_regex, one.metric_set, dict(one.tags)) == (
        "a/one.cu",
        "saxpy",
        "basic",
        {"level": "1"},
    )
    assert (two.name, two.kernel_regex, two.metric_set) == ("two.py", "default_re", "full")
    assert one.path == tmp_path / "a" / "one.cu"

    for line, message in [
        ("not json", "manifest.jsonl:1: not JSON"),
        ('{"kernel": "x"}', '"file" string'),
        ('{"file": "two.py", "tag": {}}', "unknown keys tag"),
        ('{"file": "two.py", "tags": {"n": 1}}', '"tags" must map strings to strings'),
        ('{"file": "missing.py"}', "cannot read problem file"),
        ('{"file": "two.py"}\n{"file": "two.py"}', "two.py appears twice"),
    ]:
        manifest.write_text(line + "\n")
        with pytest.raises(errors.InvalidRequest, match=message):
            discover(manifest)


@no_gpu_only
def test_cli_batch_against_a_server_without_gpu(served, tmp_path):
    problems = tmp_path / "problems"
    (problems / "level2").mkdir(parents=True)
    (problems / "__pycache__").mkdir()
    shutil.copy(FIXTURES / "seed47.py", problems / "level2" / "seed47.py")
    shutil.copy(EXAMPLES / "saxpy.cu", problems / "saxpy.cu")
    (problems / "empty.py").write_text("")
    (problems / "__pycache__" / "skipped.py").write_text("")
    (problems / "notes.txt").write_text("not a problem")
    out = tmp_path / "results.parquet"

    done = run_cli("batch", problems, "--out", out, "--server", served, "--concurrency", "2")
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("profsvc batch: 3 problems (0 from the checkpoint, 3 run)")
    frame = read_results(out)
    # Nothing was profiled, and the table has the same columns as one of successes: a column for every entry of the
    # server's catalog (read here from the table file itself), each with its unit.
    catalog = tomllib.loads((ROOT / "metrics" / "catalog.toml").read_text())
    entries = [e for kind in ("figure", "breakdown", "sass_count") for e in catalog[kind]]
    assert list(frame.columns) == [*COLUMNS, *sorted(e["name"] for e in entries)]
    assert frame.attrs["units"] == {e["name"]: e["unit"] for e in entries}
    assert frame[[e["name"] for e in entries]].isna().all().all()
    assert set(frame["server_version"]) == {version("profsvc")} and set(frame["device"]) == {""}
    assert pq.read_schema(out).metadata[b"profsvc_schema_version"] == b"2"
    # Provenance from the server's capabilities where it answered no result: its host; no driver on this machine.
    assert set(frame["host"]) == {socket.gethostname()} and set(frame["driver_version"]) == {""}
    statuses = dict(zip(frame["problem"], frame["status"], strict=True))
    assert statuses == {"empty.py": "EMPTY_SOURCE", "level2/seed47.py": "NO_GPU", "saxpy.cu": "NO_GPU"}
    assert frame["error"].str.len().min() > 0 and frame["launch_index"].isna().all()
    assert (frame["wall_seconds"] > 0).all()

    # A rerun tries again what failed for the server's sake (no GPU), not what failed for the problem's.
    again = run_cli("batch", problems, "--out", out, "--server", served)
    assert "3 problems (1 from the checkpoint, 2 run)" in again.stderr
    assert len(read_checkpoint(checkpoint_path(out))) == 3
    assert len(checkpoint_path(out).read_text().splitlines()) == 5


def test_each_rows_nvtx_ranges_and_target_from_real_reports(served, tmp_path):
    # Each archetype program pushed one range of the default domain around its kernel (read from its source).
    reports = tmp_path / "reports"
    reports.mkdir()
    names = ["bank_conflicts", "tensor_gemm", "tiny_grid"]
    for name in names:
        shutil.copy(FIXTURES / "archetypes" / f"{name}.ncu-rep", reports / f"{name}.ncu-rep")
    out = tmp_path / "ranges.parquet"
    done = run_cli("batch", reports, "--out", out, "--server", served)
    assert done.returncode == 0, done.stderr
    frame = read_results(out)
    for name in names:
        source = (EXAMPLES / "archetypes" / f"{name}.cu").read_text()
        pushed = source.split('nvtxRangePushA("', 1)[1].split('"', 1)[0]
        row = frame[frame["problem"] == f"{name}.ncu-rep"].iloc[0]
        assert json.loads(row["nvtx"]) == [{"domain": "", "push_pop": [pushed], "start_end": []}]
    assert set(frame["target"]) == {""}  # a report read: nothing ran
    # Each row names the ncu that wrote its report (every committed one: the H200 host's 2025.3.1) and the server
    # that read it; a report records no driver, and the reading server's is not the one it was captured under.
    assert set(frame["ncu_version"]) == {"2025.3.1.0"} and set(frame["host"]) == {socket.gethostname()}
    assert set(frame["driver_version"]) == {""}


def test_each_row_carries_the_server_and_the_metric_set_that_answered(tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    for name in ("ran.py", "refused.py"):
        (problems / name).write_text(f"# {name}\n")
    shutil.copy(FIXTURES / "seed47_full.ncu-rep", problems / "read.ncu-rep")

    def answer(problem: Problem) -> ProfileResult:
        if problem.name == "refused.py":
            raise errors.ServerUnavailable("no server answered")
        # Two servers behind one channel: the row names the one that answered, not the one asked for capabilities.
        served = ServerInfo(version="9.9", host="gpu-7", driver_version="580.65")
        ran = NcuRun(version="2025.3.1.0", command="ncu ...", metric_set="" if problem.task == "analyze" else "default")
        return ProfileResult(ok=True, kernels=[KernelResult(name="k")], server=served, ncu=ran)

    asked = Capabilities(server_version="1.0", host="gpu-1", driver_version="570.10")
    out = tmp_path / "r.parquet"
    run_batch(discover(problems), out, answer, server=asked)
    rows = read_results(out).set_index("problem")
    columns = ["server_version", "host", "driver_version", "metric_set"]
    assert rows.loc["ran.py", columns].tolist() == ["9.9", "gpu-7", "580.65", "default"]
    # Never answered: the capabilities' server, and the metric set as asked ('' is the server's default).
    assert rows.loc["refused.py", columns].tolist() == ["1.0", "gpu-1", "570.10", ""]
    # A report read: the reading server's driver is not the one it was captured under.
    assert rows.loc["read.ncu-rep", columns].tolist() == ["9.9", "gpu-7", "", ""]


def test_cli_batch_bad_input_is_one_line(served, tmp_path):
    done = run_cli("batch", tmp_path / "nothing", "--out", tmp_path / "r.parquet", "--server", served)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "neither a directory of problems nor a JSONL manifest" in done.stderr


def test_batch_input_found_wrong_before_any_work(tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    shutil.copy(FIXTURES / "seed47.py", problems / "seed47.py")
    (tmp_path / "folder.parquet").mkdir()
    calls = FakeProfiler()
    with pytest.raises(errors.InvalidRequest, match="is a folder: name the parquet file"):
        run_batch(discover(problems), tmp_path / "folder.parquet", calls)
    assert calls.calls == []
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_bytes(b'{"file": "caf\xe9.py"}\n')
    with pytest.raises(errors.InvalidRequest, match="JSON lines in UTF-8"):
        discover(manifest)


def test_a_file_name_that_is_not_utf8_is_refused_before_any_work(tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    shutil.copy(FIXTURES / "seed47.py", problems / "seed47.py")
    shutil.copy(FIXTURES / "seed47.py", problems / b"caf\xe9.py".decode("utf-8", "surrogateescape"))
    with pytest.raises(errors.InvalidRequest, match=r"caf\\udce9.py: the file name is not UTF-8"):
        discover(problems)


def test_a_checkpoint_line_that_is_not_a_record_is_skipped(tmp_path):
    checkpoint = tmp_path / "r.parquet.partial.jsonl"
    checkpoint.write_text('{}\n[1]\n"text"\n{"key": "k", "status": "OK"}\n')
    assert list(read_checkpoint(checkpoint)) == ["k"]


def test_progress_bar_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        bar = ProgressBar(4, stream)
        bar.update(True)
        bar.update(False)
        bar.close()
    drawn = terminal.getvalue()
    assert "2/4" in drawn and "50%" in drawn and "/s ETA " in drawn and "1 failed" in drawn
    assert pipe.getvalue() == ""


def test_several_servers_make_one_round_robin_channel(served):
    port = served.rpartition(":")[2]
    assert multi_address_target("127.0.0.1:1, localhost:2") == "ipv4:127.0.0.1:1,127.0.0.1:2"
    assert json.loads(service_config("round_robin")) == {"loadBalancingConfig": [{"round_robin": {}}]}
    with pytest.raises(errors.InvalidRequest, match="not HOST:PORT"):
        multi_address_target("127.0.0.1:1,gpu-host")
    with pytest.raises(errors.InvalidRequest, match="cannot resolve"):
        multi_address_target("127.0.0.1:1,no-such-host.invalid:50051")
    # A dead address next to a live one: round_robin sends every call to the live one.
    with ProfilerClient(f"127.0.0.1:1,localhost:{port}", timeout=30) as client:
        assert client.target == f"ipv4:127.0.0.1:1,127.0.0.1:{port}"
        for _ in range(4):
            assert client.capabilities().server_version


def test_a_batch_of_reports_gets_a_column_for_each_metric_asked_for(served, tmp_path):
    import csv

    reports = tmp_path / "reports"
    reports.mkdir()
    shutil.copy(FIXTURES / "seed47_full.ncu-rep", reports / "seed47_full.ncu-rep")
    shutil.copy(FIXTURES / "big_full.ncu-rep", reports / "big_full.ncu-rep")
    out = tmp_path / "metrics.parquet"
    asked = ["--metric", "dram__bytes_read.sum", "--derived", "twice_read=dram__bytes_read.sum * 2"]
    done = run_cli("batch", reports, "--out", out, "--server", served, *asked)
    assert done.returncode == 0, done.stderr
    frame = read_results(out)
    assert frame.attrs["units"]["dram__bytes_read.sum"] == "byte" and frame.attrs["units"]["twice_read"] == ""
    for stem in ("seed47_full", "big_full"):
        # ncu's own raw page of each report: the value the column must hold.
        names, _, values = list(csv.reader((FIXTURES / f"{stem}_raw.csv").open()))[:3]
        raw = float(values[names.index("dram__bytes_read.sum")].replace(",", ""))
        row = frame[frame["problem"] == f"{stem}.ncu-rep"].iloc[0]
        assert row["dram__bytes_read.sum"] == pytest.approx(raw, rel=5e-3)
        assert row["twice_read"] == pytest.approx(2 * raw, rel=5e-3)
    # Without --metric and --derived, no such columns.
    again = run_cli("batch", reports, "--out", tmp_path / "plain.parquet", "--server", served)
    assert again.returncode == 0 and "dram__bytes_read.sum" not in read_results(tmp_path / "plain.parquet")


SWEPT = """import torch

batch_size = 16
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


class SweptProfiler(FakeProfiler):
    """Reads back the constants each problem's file is sent with: its `duration` is dim, its `occupancy`
    batch_size."""

    def __call__(self, problem: Problem) -> ProfileResult:
        self.calls.append(f"{problem.name} {dict(problem.params)} {problem.repeat}")
        if len(self.calls) == self.stop_at:
            raise KeyboardInterrupt
        constants: dict = {}
        exec(problem.content().decode().replace("import torch", ""), constants)
        figures = {
            "duration": FigureValue(value=float(constants["dim"]), unit="ns"),
            "occupancy": FigureValue(value=float(constants["batch_size"]), unit="%"),
        }
        return ProfileResult(ok=True, kernels=[KernelResult(name="k", figures=figures)])


def test_a_sweep_with_repeats_is_a_row_per_point_and_repeat_and_resumes(tmp_path):
    (tmp_path / "problems").mkdir()
    (tmp_path / "problems" / "p.py").write_text(SWEPT)
    problems = discover(tmp_path / "problems", sweep={"dim": [1024, 4096], "batch_size": [8, 16]}, repeats=2)
    out = tmp_path / "swept.parquet"
    with pytest.raises(KeyboardInterrupt):
        run_batch(problems, out, SweptProfiler(stop_at=4), concurrency=1)
    again = SweptProfiler()
    summary = run_batch(problems, out, again, concurrency=1)
    # Three finished before the interruption; the other five, each grid point and repeat its own problem, now.
    assert (summary.total, summary.resumed, summary.ok) == (8, 3, 8) and len(again.calls) == 5
    frame = read_results(out)
    assert list(frame.columns) == [*COLUMNS, "param_batch_size", "param_dim", "duration", "occupancy"]
    assert str(frame["param_dim"].dtype) == "Int64" and str(frame["repeat"].dtype) == "Int64"
    points = list(zip(frame["param_dim"], frame["param_batch_size"], frame["repeat"], strict=True))
    assert points == [(dim, batch, repeat) for dim in (1024, 4096) for batch in (8, 16) for repeat in (0, 1)]
    # What ran is what the row says: the file as sent held each point's values.
    assert list(frame["duration"]) == list(frame["param_dim"].astype(float))
    assert list(frame["occupancy"]) == list(frame["param_batch_size"].astype(float))
    assert json.loads(frame["params"].iloc[0]) == {"batch_size": 8, "dim": 1024}
    assert pq.read_schema(out).metadata[b"profsvc_schema_version"] == b"2"
    # The file on disk is never written to.
    assert (tmp_path / "problems" / "p.py").read_text() == SWEPT


def test_swept_values_of_other_kinds_keep_a_column_each(tmp_path):
    (tmp_path / "p.py").write_text(SWEPT + "mode = 'fast'\nshape = (1, 2)\nscale = 1\n")
    manifest = tmp_path / "m.jsonl"
    sweep = {"mode": ["fast", "slow"], "shape": [[1, 2], [3, 4]], "scale": [1, 2.5]}
    manifest.write_text(json.dumps({"file": "p.py", "sweep": sweep}) + '\n{"file": "q.py"}\n')
    (tmp_path / "q.py").write_text("# unswept\n")
    out = tmp_path / "r.parquet"
    run_batch(discover(manifest), out, FakeProfiler())
    frame = read_results(out)
    assert str(frame["param_scale"].dtype) == "float64" and frame["param_mode"].iloc[0] == "fast"
    # A value of no column type of its own is JSON; a problem without the constant has none.
    assert list(frame["param_shape"].iloc[:2]) == ["[1, 2]", "[1, 2]"] and pd.isna(frame["param_shape"].iloc[-1])
    assert frame["params"].iloc[-1] == "{}" and frame["repeat"].iloc[-1] == 0


@no_gpu_only
def test_cli_batch_sweep_against_a_server_without_gpu(served, tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    # A published problem's names (the server checks them before it finds no GPU).
    (problems / "p.py").write_text(SWEPT + "\n\nclass Model:\n    pass\n")
    out = tmp_path / "r.parquet"
    grid = ["--sweep", "dim=1024,4096", "--sweep", "batch_size=8,16", "--repeat", "2"]
    done = run_cli("batch", problems, "--out", out, "--server", served, *grid)
    assert done.returncode == 1, done.stderr
    assert "8 problems (0 from the checkpoint, 8 run)" in done.stderr
    frame = read_results(out)
    assert set(frame["status"]) == {"NO_GPU"} and len(frame) == 8
    assert sorted(zip(frame["param_dim"], frame["param_batch_size"], frame["repeat"], strict=True)) == [
        (dim, batch, repeat) for dim in (1024, 4096) for batch in (8, 16) for repeat in (0, 1)
    ]
    bad = run_cli("batch", problems, "--out", out, "--server", served, "--sweep", "channels=3")
    assert bad.returncode == 2
    assert bad.stderr == (
        "profsvc: error: p.py: cannot sweep channels: the module has no top-level assignment `channels = ...`"
        " [BAD_ARGUMENT]\n"
    )
